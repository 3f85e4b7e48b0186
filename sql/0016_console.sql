-- 0016: the operator console (docs/console.md): dead letters grouped by reason, and replay
-- jobs that record who replayed what, letter by letter.

-- A letter's group: its first death reason and the class of its error, digits folded so
-- "after 3 attempts" and "after 4 attempts" are one group. Generated: the drain writes
-- nothing new, and the key cannot disagree with the columns it comes from.
ALTER TABLE dead_letters
    ADD COLUMN error_class text GENERATED ALWAYS AS
        (left(regexp_replace(coalesce(last_error, ''), '[0-9]+', 'N', 'g'), 200)) STORED;
ALTER TABLE dead_letters
    ADD COLUMN group_key text GENERATED ALWAYS AS
        (md5(coalesce(first_death_reason, '') || '|' ||
             left(regexp_replace(coalesce(last_error, ''), '[0-9]+', 'N', 'g'), 200))) STORED;
CREATE INDEX dead_letters_group ON dead_letters (group_key, id);
CREATE INDEX dead_letters_payment ON dead_letters (payment_id);

-- A replay of many letters: asked for once, worked by payments-api at REPLAY_RATE.
CREATE TABLE replay_jobs (
    id           bigserial   PRIMARY KEY,
    requested_by text        NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    selector     jsonb       NOT NULL, -- what the operator chose: {"ids": [...]} or {"group": k}
    status       text        NOT NULL DEFAULT 'queued'
                             CHECK (status IN ('queued', 'running', 'done')),
    total        integer     NOT NULL,
    finished_at  timestamptz
);
CREATE INDEX replay_jobs_open ON replay_jobs (id) WHERE status <> 'done';

-- One row per letter of a job; result NULL until the letter was tried. A success is written
-- in the replay's own transaction, so a crash cannot lose it nor repeat the publish.
CREATE TABLE replay_job_letters (
    job_id    bigint      NOT NULL REFERENCES replay_jobs (id),
    letter_id bigint      NOT NULL REFERENCES dead_letters (id),
    result    text        CHECK (result IN ('replayed', 'already_replayed', 'window_expired',
                                            'unroutable', 'not_found', 'failed')),
    detail    text,
    at        timestamptz,
    PRIMARY KEY (job_id, letter_id)
);

ALTER TABLE dead_letters ADD COLUMN replay_job bigint REFERENCES replay_jobs (id);

GRANT SELECT, INSERT, UPDATE ON replay_jobs, replay_job_letters TO paygw_api;
GRANT USAGE ON SEQUENCE replay_jobs_id_seq TO paygw_api;
