-- Desired rules. Times are unix microseconds, UTC.
CREATE TABLE rules (
	id                 INTEGER PRIMARY KEY AUTOINCREMENT,
	family             INTEGER NOT NULL,             -- flowspec.Family
	nlri               BLOB    NOT NULL,             -- Match.AppendTo: the key
	communities        BLOB    NOT NULL,             -- Action.AppendExtCommunities
	text               TEXT    NOT NULL,             -- Rule.String()
	reason             TEXT    NOT NULL DEFAULT '',
	actor              TEXT    NOT NULL DEFAULT '',
	sites              TEXT    NOT NULL DEFAULT '[]', -- JSON array; [] = every site
	created_at         INTEGER NOT NULL,
	updated_at         INTEGER NOT NULL,
	expires_at         INTEGER,                      -- NULL: never
	state              TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'withdrawn', 'expired')),
	withdraw_requested INTEGER NOT NULL DEFAULT 0 CHECK (withdraw_requested IN (0, 1))
) STRICT;

-- At most one active rule per Match.
CREATE UNIQUE INDEX rules_active_match ON rules (family, nlri) WHERE state = 'active';
CREATE INDEX rules_state ON rules (state, id);

-- Announce status, per rule and site.
CREATE TABLE rule_status (
	rule_id    INTEGER NOT NULL REFERENCES rules (id),
	site       TEXT    NOT NULL,
	announced  INTEGER NOT NULL DEFAULT 0 CHECK (announced IN (0, 1)),
	last_error TEXT    NOT NULL DEFAULT '',
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (rule_id, site)
) STRICT, WITHOUT ROWID;

-- Audit history: every change, with the changed fields before and after.
CREATE TABLE rule_events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	rule_id    INTEGER NOT NULL REFERENCES rules (id),
	at         INTEGER NOT NULL,
	kind       TEXT    NOT NULL,
	actor      TEXT    NOT NULL DEFAULT '',
	site       TEXT    NOT NULL DEFAULT '',
	old_values TEXT,   -- JSON object
	new_values TEXT    -- JSON object
) STRICT;

CREATE INDEX rule_events_rule ON rule_events (rule_id, id);
