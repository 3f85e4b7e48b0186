-- 0019: the relay's mark writes no index entry (issue 17: fewer writes per payment).
--
-- The relay updates every outbox row once (pending -> published). `state` was in the predicates
-- of outbox_pending and outbox_published_at, and an UPDATE that changes a column an index names
-- (in its key or its predicate) cannot be HOT: each mark wrote a new tuple plus an entry into
-- outbox_pkey, outbox_event_id_key (a random place of a large text index) and
-- outbox_published_at, and left three dead entries for vacuum. The relay's drain measured 48 us
-- of PostgreSQL CPU per row.
--
-- Now the pending rows are listed in a table of their own, outbox_pending, that triggers keep in
-- step with `state` for every writer (accept, mark, nack, rearm, purge, an operator's DELETE),
-- and no index of outbox names `state`, `published_at` or any column a mark changes. A mark is a
-- delete from a small table plus a HOT update of the outbox row, given room on its page: new
-- outbox pages are filled to 50%, so the one later version of each row fits beside it.
--
-- Without outbox_published_at the purge walks outbox_pkey from a position the relay remembers
-- (purge_outbox() below): rows below it are deleted or unroutable (never purged), so each call
-- reads only rows it has not judged before.

DROP INDEX outbox_pending; -- the table below takes its name
DROP INDEX outbox_published_at;

CREATE TABLE outbox_pending (
    id bigint PRIMARY KEY -- an outbox row whose state is 'pending'
);
INSERT INTO outbox_pending (id) SELECT id FROM outbox WHERE state = 'pending';

-- Statement triggers with transition tables: one call per statement, not per row. A queue table's
-- statistics are always stale (empty at the last ANALYZE, 100,000 rows now, or the reverse), and
-- a plan made on "empty" reads the whole list for every statement (a claim took 284 ms with
-- 100,000 pending rows): whatever reads outbox_pending by id does it by its primary key.
CREATE FUNCTION outbox_pending_after_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_pending (id) SELECT id FROM new_rows WHERE state = 'pending';
    RETURN NULL;
END $$;

CREATE FUNCTION outbox_pending_after_update() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    DELETE FROM outbox_pending p USING new_rows n WHERE p.id = n.id AND n.state <> 'pending';
    INSERT INTO outbox_pending (id) SELECT id FROM new_rows WHERE state = 'pending'
        ON CONFLICT (id) DO NOTHING; -- a nack or a rearm of a row already listed
    RETURN NULL;
END $$;

CREATE FUNCTION outbox_pending_after_delete() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    DELETE FROM outbox_pending p USING old_rows o WHERE p.id = o.id AND o.state = 'pending';
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_pending_insert AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_pending_after_insert();
CREATE TRIGGER outbox_pending_update AFTER UPDATE ON outbox
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_pending_after_update();
CREATE TRIGGER outbox_pending_delete AFTER DELETE ON outbox
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_pending_after_delete();

ALTER TABLE outbox SET (fillfactor = 50);

-- claim_outbox: the relay's next batch, oldest first, skipping rows another lane holds. It walks
-- outbox_pending's primary key in order and locks each row's outbox row through a LATERAL
-- subquery, so the planner cannot start from outbox instead (ORDER BY p.id is also the order of
-- outbox_pkey, and with "no pending rows" in the statistics it read 335,000 outbox rows to find
-- 1,024); it stops after p_limit rows, however many are listed.
CREATE FUNCTION claim_outbox(p_limit integer)
RETURNS TABLE (id bigint, event_id text, payment_id text, routing_key text, body text,
               traceparent text, attempt integer)
LANGUAGE sql SET enable_seqscan = off SET enable_sort = off AS $$
    SELECT o.id, o.event_id, o.payment_id, o.routing_key, o.body, o.traceparent, o.attempt
      FROM outbox_pending p
     CROSS JOIN LATERAL (
        SELECT o.id, o.event_id, o.payment_id, o.routing_key, o.body, o.traceparent, o.attempt
          FROM outbox o
         WHERE o.id = p.id AND o.state = 'pending' AND o.next_attempt_at <= now()
           FOR UPDATE SKIP LOCKED) o
     ORDER BY p.id
     LIMIT p_limit;
$$;

COMMENT ON FUNCTION claim_outbox(integer) IS
    'Locks and returns up to p_limit pending outbox rows due now, oldest first, skipping rows '
    'locked by another transaction. Called by payments-relay at the start of a batch. sql/0019.';

-- purge_outbox: delete the published rows older than p_hours among the first p_limit rows
-- above p_after (an outbox id), and say where the next call starts: below it every row is
-- deleted or unroutable. A row that is pending, published too recently, or younger than a minute
-- (an accept with a smaller id may still be committing) stops the position.
CREATE FUNCTION purge_outbox(p_after bigint, p_hours integer, p_limit integer)
RETURNS TABLE (deleted integer, next_after bigint)
LANGUAGE sql AS $$
    WITH scanned AS (
        SELECT id, state, published_at, created_at
          FROM outbox WHERE id > p_after ORDER BY id LIMIT p_limit
    ), gone AS (
        DELETE FROM outbox o USING scanned s
         WHERE o.id = s.id AND s.state = 'published'
           AND s.published_at < now() - make_interval(hours => p_hours)
           AND o.state = 'published' -- not rearmed since the scan
        RETURNING o.id
    ), kept AS (
        SELECT min(s.id) AS id FROM scanned s
         WHERE (s.state <> 'unroutable' OR s.created_at > now() - interval '1 minute')
           AND s.id NOT IN (SELECT id FROM gone)
    )
    SELECT (SELECT count(*)::integer FROM gone),
           coalesce((SELECT id - 1 FROM kept), (SELECT max(id) FROM scanned), p_after);
$$;

COMMENT ON FUNCTION purge_outbox(bigint, integer, integer) IS
    'Deletes published outbox rows older than p_hours among the p_limit rows above p_after; '
    'returns how many and the id the next call starts after. Called by payments-relay. sql/0019.';

REVOKE EXECUTE ON FUNCTION claim_outbox(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_outbox(integer) TO paygw_relay;
REVOKE EXECUTE ON FUNCTION purge_outbox(bigint, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION purge_outbox(bigint, integer, integer) TO paygw_relay;
GRANT SELECT, INSERT ON outbox_pending TO paygw_api;
GRANT SELECT, INSERT, DELETE ON outbox_pending TO paygw_relay;
