-- The sites that exist: each instance registers its own at start, so that
-- a rule naming a site nobody runs (a typo) can be refused.
CREATE TABLE sites (
	name            TEXT    PRIMARY KEY,
	registered_at   INTEGER NOT NULL,
	last_started_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Sites that already reported announce status exist.
INSERT INTO sites (name, registered_at, last_started_at)
	SELECT site, MIN(updated_at), MAX(updated_at) FROM rule_status GROUP BY site;
