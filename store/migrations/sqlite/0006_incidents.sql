-- The playbook engine's incidents, per site: each instance keeps its own
-- (the engine assigns ids, unique within a site). doc is the incident as
-- the engine encodes it (JSON); the store does not read it.
CREATE TABLE IF NOT EXISTS incidents (
	site       TEXT    NOT NULL,
	id         INTEGER NOT NULL,
	state      TEXT    NOT NULL,
	opened_at  INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	doc        TEXT    NOT NULL,
	PRIMARY KEY (site, id)
) STRICT;
CREATE INDEX IF NOT EXISTS incidents_state ON incidents (site, state, id);
