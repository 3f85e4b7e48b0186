-- 0003: dead letters drained from payments.settlement.dlq, with the broker's
-- death history snapshotted: a republished message does not carry x-death on.

CREATE TABLE dead_letters (
    id                   bigserial   PRIMARY KEY,
    dedupe_key           bytea       NOT NULL UNIQUE, -- the same message drained twice is one letter
    event_id             text,
    payment_id           text,
    message_id           text,
    routing_key          text,
    attempt              integer,
    last_error           text,
    headers              jsonb       NOT NULL,
    body                 bytea       NOT NULL,
    body_is_json         boolean     NOT NULL,
    x_death              jsonb       NOT NULL DEFAULT '[]',
    first_death_reason   text,
    first_death_queue    text,
    first_death_exchange text,
    died_at              timestamptz,             -- the first death's time, else the drain's
    drained_at           timestamptz NOT NULL DEFAULT now(),
    replayed_at          timestamptz,
    replayed_by          text
);
CREATE INDEX dead_letters_event ON dead_letters (event_id);
