-- The sites that exist: each instance registers its own at start, so that
-- a rule naming a site nobody runs (a typo) can be refused.
CREATE TABLE sites (
	name            text        PRIMARY KEY,
	registered_at   timestamptz NOT NULL,
	last_started_at timestamptz NOT NULL
);

-- Sites that already reported announce status exist.
INSERT INTO sites (name, registered_at, last_started_at)
	SELECT site, MIN(updated_at), MAX(updated_at) FROM rule_status GROUP BY site;
