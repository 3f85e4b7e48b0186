-- 0014: reconciliation's "no payment stays accepted too long" finds its rows through an
-- index. Without it the check read the whole table: 688 ms on 1,000,000 payments, against
-- 8.6 ms with it (docs/decisions.md 17). The index holds only the payments not yet
-- confirmed by the broker, so it stays a few pages however large `payments` grows, and a
-- payment leaves it at its first move.
CREATE INDEX payments_accepted_created ON payments (created_at) WHERE status = 'accepted';
