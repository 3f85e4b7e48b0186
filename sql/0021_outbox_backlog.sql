-- 0021: one owner for "how far behind is the relay". The relay's gauges (worker/relay/outbox.c),
-- the API's back-pressure (api/outbox_watch.c) and the console's overview
-- (api/console/overview.c) asked it in three copies of one query over outbox_pending (sql/0019).
--
-- pending: the pending outbox rows, counted up to count_limit (NULL: all; the API only needs to
-- know whether there are more than OUTBOX_MAX_BACKLOG). oldest_age_seconds: the age of the
-- oldest, 0 when there is none; the pending row with the smallest id is the oldest, so one
-- lookup by primary key answers it, whatever the statistics say.
CREATE FUNCTION outbox_backlog(count_limit bigint DEFAULT NULL)
RETURNS TABLE (pending bigint, oldest_age_seconds double precision)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox_pending LIMIT count_limit) s),
           coalesce(extract(epoch FROM now() - (SELECT created_at FROM outbox
                                                 WHERE id = (SELECT min(id) FROM outbox_pending))),
                    0)::double precision
$$;

REVOKE EXECUTE ON FUNCTION outbox_backlog(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox_backlog(bigint) TO paygw_api, paygw_relay;
