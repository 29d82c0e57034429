-- History entries no longer check their rule with a foreign key: the
-- check ran a locking lookup of the rule for every entry inserted (in a
-- bulk load, 78 of the ~150 µs a rule cost on the server). Entries are
-- written only by the store, in the transaction that writes their rule,
-- and a purge deletes a rule only once none of its entries is left
-- (store.PurgeHistory). rule_status keeps its foreign key.
ALTER TABLE rule_events DROP CONSTRAINT IF EXISTS rule_events_rule_id_fkey;
