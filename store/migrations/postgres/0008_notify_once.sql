-- The change feed's NOTIFY is sent once per transaction that records
-- history (store.flushEvents), not by a trigger per statement: a batch is
-- inserted one pipelined statement per rule, and the trigger's call per
-- statement cost more than the insert itself (0.26 ms of 0.42 ms a rule).
DROP TRIGGER IF EXISTS rules_notify_change ON rules;
DROP FUNCTION IF EXISTS ribkeeper_notify_change();
