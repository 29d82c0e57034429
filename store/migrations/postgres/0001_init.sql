-- Desired rules, shared by every site.
CREATE TABLE rules (
	id                 bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	family             smallint    NOT NULL,             -- flowspec.Family
	nlri               bytea       NOT NULL,             -- Match.AppendTo: the key
	communities        bytea       NOT NULL,             -- Action.AppendExtCommunities
	text               text        NOT NULL,             -- Rule.String()
	reason             text        NOT NULL DEFAULT '',
	actor              text        NOT NULL DEFAULT '',
	sites              jsonb       NOT NULL DEFAULT '[]', -- JSON array; [] = every site
	created_at         timestamptz NOT NULL,
	updated_at         timestamptz NOT NULL,
	expires_at         timestamptz,                      -- NULL: never
	state              text        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'withdrawn', 'expired')),
	withdraw_requested boolean     NOT NULL DEFAULT false
);

-- At most one active rule per Match.
CREATE UNIQUE INDEX rules_active_match ON rules (family, nlri) WHERE state = 'active';
CREATE INDEX rules_state ON rules (state, id);

-- Announce status, per rule and site.
CREATE TABLE rule_status (
	rule_id    bigint      NOT NULL REFERENCES rules (id),
	site       text        NOT NULL,
	announced  boolean     NOT NULL DEFAULT false,
	last_error text        NOT NULL DEFAULT '',
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (rule_id, site)
);

-- Audit history: every change, with the changed fields before and after.
CREATE TABLE rule_events (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	rule_id    bigint      NOT NULL REFERENCES rules (id),
	at         timestamptz NOT NULL,
	kind       text        NOT NULL,
	actor      text        NOT NULL DEFAULT '',
	site       text        NOT NULL DEFAULT '',
	old_values jsonb,
	new_values jsonb
);

CREATE INDEX rule_events_rule ON rule_events (rule_id, id);

-- Change feed: every statement that changes rules wakes every instance.
-- Statement-level, so a batch of 50k rows sends one notification.
CREATE FUNCTION ribkeeper_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('ribkeeper_changes', '');
	RETURN NULL;
END
$$;

CREATE TRIGGER rules_notify_change
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON rules
	FOR EACH STATEMENT EXECUTE FUNCTION ribkeeper_notify_change();
