-- 0005: group commit for the accept path. payments-api sends the requests that
-- arrive together as one array; each row runs accept_payment() in its own
-- subtransaction (an EXCEPTION block), so a bad row never fails its neighbours,
-- and the whole batch shares one COMMIT and one WAL flush.
CREATE FUNCTION accept_batch(p_jobs jsonb)
RETURNS TABLE (idx integer, outcome text, response_body text)
LANGUAGE plpgsql AS $$
DECLARE
    j jsonb;
    i integer := 0;
    r record;
BEGIN
    FOR j IN SELECT value FROM jsonb_array_elements(p_jobs) LOOP
        BEGIN
            SELECT a.outcome, a.response_body INTO r
              FROM accept_payment(j->>'event_id', j->>'payment_id', j->>'method', j->>'decision',
                                  (j->>'amount_cents')::bigint, j->>'currency', j->>'payee_bank',
                                  j->>'payee_account', (j->>'decided_at')::timestamptz,
                                  decode(j->>'fingerprint', 'hex'), j->>'body',
                                  j->>'traceparent', j->>'response') a;
            idx := i;
            outcome := r.outcome;
            response_body := r.response_body;
        EXCEPTION WHEN OTHERS THEN
            idx := i;
            outcome := 'error';
            response_body := SQLSTATE || ' ' || SQLERRM;
        END;
        RETURN NEXT;
        i := i + 1;
    END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION accept_batch(jsonb) TO paygw_api;
