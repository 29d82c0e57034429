-- The playbook engine's incidents, per site: each instance keeps its own
-- (the engine assigns ids, unique within a site). doc is the incident as
-- the engine encodes it (JSON); the store does not read it.
CREATE TABLE IF NOT EXISTS incidents (
	site       text        NOT NULL,
	id         bigint      NOT NULL,
	state      text        NOT NULL,
	opened_at  timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	doc        text        NOT NULL,
	PRIMARY KEY (site, id)
);
CREATE INDEX IF NOT EXISTS incidents_state ON incidents (site, state, id);
