-- 0017: fewer index writes per payment on a database that has lived (issue 17's profile).
--
-- A payment row is updated twice after its insert (published by the relay, settled by the
-- worker), and neither update touches an indexed column. PostgreSQL can then write the new
-- version on the same page without new index entries (a HOT update), but only if the page has
-- room: with the default fillfactor of 100 the insertion page is full by the time the relay
-- marks the row, and about 40% of the updates wrote two new entries into the two 500 MB
-- indexes of a 2,000,000-payment table (payments_pkey, payments_event_id_key), dirtying random
-- index pages. Leaving 30% of each new page free made nearly all of them HOT in a 1,500/s run.
-- Only pages written from now on are filled this way; the older ones are not rewritten.
ALTER TABLE payments SET (fillfactor = 70);

-- No query reads the ledger by account (pg_stat_user_indexes: 0 scans over the life of the
-- benchmark database), while every settled payment wrote two entries into it.
DROP INDEX ledger_entries_account;
