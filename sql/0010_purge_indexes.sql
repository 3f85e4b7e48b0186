-- 0010: the retention purges find their rows through an index. The relay and the
-- worker each run a small purge once a minute on their only thread; without these
-- indexes each purge read its whole table (600 ms for the outbox at 1.8 million
-- rows) while the payments behind it waited.
CREATE INDEX outbox_published_at ON outbox (published_at) WHERE state = 'published';
CREATE INDEX inbox_processed_at ON inbox (processed_at);
