-- 0006: batched settlement. payments-worker applies the deliveries it holds in
-- one transaction; each row runs settle_payment() in its own subtransaction (an
-- EXCEPTION block), so one failing event never takes the others down, and the
-- batch shares one COMMIT. Acks go out only after that COMMIT.
CREATE FUNCTION settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, outcome text, seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    j jsonb;
    i integer := 0;
    r record;
BEGIN
    FOR j IN SELECT value FROM jsonb_array_elements(p_items) LOOP
        BEGIN
            SELECT s.outcome, s.seconds INTO r
              FROM settle_payment(j->>'event_id', j->>'payment_id', (j->>'attempt')::integer) s;
            idx := i;
            outcome := r.outcome;
            seconds := r.seconds;
            -- unknown_payment and terminal write nothing: undo the inbox row of this one only
            IF r.outcome IN ('unknown_payment', 'terminal') THEN
                RAISE EXCEPTION USING ERRCODE = 'PGW01', MESSAGE = r.outcome;
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'PGW01' THEN
                idx := i;
                outcome := SQLERRM;
                seconds := NULL;
            WHEN OTHERS THEN
                idx := i;
                outcome := 'error';
                seconds := NULL;
        END;
        RETURN NEXT;
        i := i + 1;
    END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION settle_batch(jsonb) TO paygw_worker;
