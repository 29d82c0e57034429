-- The declarative set a rule belongs to ('' for none): PUT /v1/sets/NAME
-- makes the active rules carrying NAME exactly the list it was given, and
-- reads them back by this index.
ALTER TABLE rules ADD COLUMN set_name text NOT NULL DEFAULT '';
CREATE INDEX rules_active_set ON rules (set_name) WHERE state = 'active' AND set_name <> '';
