-- 0022: the pending list's triggers (sql/0019) find the rows to delete by probes of its primary
-- key, whatever the statistics say.
--
-- The update trigger deleted with `USING new_rows n WHERE p.id = n.id`: a join the planner plans
-- from outbox_pending's statistics, which a queue table has always stale. In the benchmark's
-- end-to-end search the list had been vacuumed at 7 rows on 47 pages, then held 145,000: the plan
-- was a hash join over a full scan of its primary key, so every mark of 256 rows read the whole
-- backlog (17 ms for 150,000 rows with warm pages; past the relay's 5 s statement timeout with
-- dead entries and two lanes at once). The larger the backlog, the slower each mark: the relay
-- stopped draining and the backlog grew at the offered rate.
--
-- `id = ANY (ARRAY(...))` leaves the planner one way in: an index condition on the primary key,
-- one probe per listed id (enable_seqscan = off rules out a scan of the table).

CREATE OR REPLACE FUNCTION outbox_pending_after_update() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    DELETE FROM outbox_pending
     WHERE id = ANY (ARRAY(SELECT n.id FROM new_rows n WHERE n.state <> 'pending'));
    INSERT INTO outbox_pending (id) SELECT id FROM new_rows WHERE state = 'pending'
        ON CONFLICT (id) DO NOTHING; -- a nack or a rearm of a row already listed
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION outbox_pending_after_delete() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    DELETE FROM outbox_pending
     WHERE id = ANY (ARRAY(SELECT o.id FROM old_rows o WHERE o.state = 'pending'));
    RETURN NULL;
END $$;
