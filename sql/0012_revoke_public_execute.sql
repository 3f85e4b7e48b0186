-- 0012: only the program that calls a function may run it.
-- PostgreSQL grants EXECUTE on every new function to PUBLIC, so the GRANTs of 0005 and 0006
-- restricted nothing: every role, including the relay's, could run the accept and the settle.
-- The functions run with the caller's rights (SECURITY INVOKER), so the batch functions'
-- callers also keep the row functions they call: accept_batch() runs accept_payment() and
-- settle_batch() runs settle_payment() for batches that hold one event twice.
-- CREATE OR REPLACE (0007-0009) kept each function's ACL, so this covers their current bodies;
-- a later migration that DROPs and re-CREATEs one of them must repeat these lines.
-- payment_status_rank() stays PUBLIC: an immutable function of its argument that reads no table
-- (the worker's queries use it).
REVOKE EXECUTE ON FUNCTION accept_batch(jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION accept_payment(text, text, text, text, bigint, text, text, text,
                                          timestamptz, bytea, text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION settle_batch(jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION settle_payment(text, text, integer) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION accept_batch(jsonb) TO paygw_api;
GRANT EXECUTE ON FUNCTION accept_payment(text, text, text, text, bigint, text, text, text,
                                         timestamptz, bytea, text, text, text) TO paygw_api;
GRANT EXECUTE ON FUNCTION settle_batch(jsonb) TO paygw_worker;
GRANT EXECUTE ON FUNCTION settle_payment(text, text, integer) TO paygw_worker;
