// Package api is ribkeeper's HTTP JSON API: the handlers, the wire types,
// and the control socket and TCP listener it is served on. The client and
// the CLI that talk to it are package cli; the Prometheus metrics, package
// metrics.
//
// The API is served on a unix socket (mode 0600) and optionally on TCP
// (ServeTCP), with TLS if a certificate is given. Every request made over
// the socket acts as actor "cli". Over TCP every request needs a bearer
// token ("Authorization: Bearer SECRET"): role read allows the GET routes
// and /metrics, role write everything; the token's name is the actor
// recorded in the audit trail (401 unauthorized without a known token, 403
// forbidden for a read token that tries to write). A TCP listener without
// tokens is allowed on loopback only (actor "tcp"). The tokens, and the
// names and origins below, can be replaced while serving (SetTCPAccess, on
// SIGHUP): a removed or changed token is refused at once and the requests
// it has open (event streams) end.
//
// No web page can write over TCP (web.go): a request whose Host header
// does not name the listener is 421 unknown_host (DNS rebinding); a write
// whose body is not declared application/json is 415
// unsupported_media_type; a write from a page of another origin (Origin,
// Sec-Fetch-Site) is 403 foreign_origin. TCPConfig.Hosts and Origins add
// names and origins.
//
// Every write goes through the admission gate (package admit, the Gate
// interface) with the request's actor (writer): the API reads the store
// but never writes it. A token may be scoped (Token.Prefixes, Actions,
// MaxActiveRules, MaxNewRulesPerMinute, NeverExpires, OthersRules): it
// then adds, sees and withdraws only rules whose destination lies wholly
// inside one of its prefixes (rule list and show, history, diff and rib
// show it nothing else; another scope's rule is a 404 like an unknown id),
// uses only its actions, changes only its own rules, and holds at most
// MaxActiveRules active rules; the guardrails apply on top. A refusal is
// 403 out_of_scope naming the prefix, action or quota (429 rate_limited
// for its rate of new rules). Bodies are JSON objects with no unknown
// fields, at most 1 MiB by default (413 body_too_large beyond). A request
// is checked in full before anything is stored. Status, series and events
// count only a scoped token's own rules (scoped.go). Event streams and
// connections of the TCP listener are bounded (limits.go): 429
// too_many_streams names the setting.
//
// # Routes
//
//	POST   /v1/rules               add or update a rule (upsert by match)
//	       body {"text": "match ... then ...", "ttl": "10m", "reason": "...", "sites": ["par1"]}
//	       ttl is a Go duration or whole days ("2d"), optional (no ttl: the default TTL for a new rule,
//	       the stored expiry for an update; "never" needs the permission), positive;
//	       sites is optional (absent or empty: every site).
//	       201 Created with the rule when new, 200 OK with the rule when a
//	       rule with the same match existed (same id, action/ttl/reason updated).
//	POST   /v1/rules/batch          body {"rules": [same objects as above]}: upsert them
//	                                all in one transaction, or none (errors name
//	                                the field, e.g. "rules[3].text");
//	                                200 {"rules": [rule...]} in request order
//	POST   /v1/rules/withdraw       body {"text": "match ... then ..."}: withdraw the active
//	                                rule with that match (the action is ignored);
//	                                200 {"rules": [rule...]}, empty when none was active
//	POST   /v1/rules/withdraw/batch body {"rules": [{"text": ...}, ...]}: withdraw the active
//	                                rule of each match in one transaction, or none
//	                                (errors name "rules[3].text"); texts matching no
//	                                active rule are skipped; 200 {"rules": [withdrawn...]}
//	GET    /v1/rules[?state=S]      {"rules": [rule...]}, newest first; S is one of
//	                                active, withdrawing, withdrawn, expired (default: all)
//	GET    /v1/rules/{id}           the rule
//	GET    /v1/rules/{id}/history   {"events": [event...]}: the audit trail, oldest first;
//	                                event {"id", "rule_id", "at", "kind", "actor", "site",
//	                                "old": {field: text}, "new": {field: text}}
//	DELETE /v1/rules/{id}           ask for the rule to be withdrawn: 202 Accepted with
//	                                the rule (state "withdrawing" until the path is gone)
//	PUT    /v1/sets/{name}          body as /v1/rules/batch: make the rules of set name
//	                                exactly that list, writing only the difference;
//	                                200 {"set", "rules", "created", "updated",
//	                                "unchanged", "withdrawn"} (admit.ApplySetLines)
//	GET    /v1/sets                 {"sets": [{"name", "active", "actors"}]}
//	GET    /v1/sets/{name}          {"rules": [rule...]}: its active rules, paged as /v1/rules
//	DELETE /v1/sets/{name}          withdraw every rule of the set; 200 as PUT
//	GET    /v1/rib                  {"paths": [path...]}: the FlowSpec paths this
//	                                process has in its BGP RIB (the mirror), i.e.
//	                                actual state; 503 until the mirror is ready
//	GET    /v1/peers                {"peers": [peer...]}: BGP neighbors and session state
//	GET    /v1/status               {"peers": [...], "rules": {counts by state},
//	                                "last_pass": {...}, "errors": [...]}: see Status
//	GET    /v1/whoami               {"name", "role", "prefixes": [...], "actions": [...],
//	                                "max_active_rules": N}: who the request acts as
//	                                ("cli" over the socket) and its scope (empty
//	                                lists and 0: unlimited)
//	GET    /v1/diff                 {"add", "update", "withdraw", ...}: what the next
//	                                reconcile pass would change (see Diff)
//	POST   /v1/validate             the body of POST /v1/rules, checked as it would be
//	                                stored (same parser, same errors), nothing stored:
//	                                200 {"valid", "family", "text" (canonical),
//	                                "match", "action", "expires_at", "default_ttl",
//	                                "keeps_expiry", "warnings"}; valid false with
//	                                "guardrail" {"name", "field", "message"} when a
//	                                guardrail would refuse it
//	GET    /v1/events               server-sent events of rule, peer and pass changes,
//	                                resumable with Last-Event-ID (see events.go;
//	                                when WithEvents is given)
//	GET    /v1/series               {"interval_seconds", "points": [...]}: active rules
//	                                and drift repairs over time (when WithSeries is given)
//	GET    /v1/openapi.json         the OpenAPI 3 document of these routes (openapi.json);
//	                                public on TCP: no token needed
//	GET    /ui/                     the console's pages, on TCP only and without a
//	                                token (when WithConsole is given; / redirects)
//	GET    /metrics                 Prometheus metrics (when WithMetrics is given)
//	POST   /v1/shutdown             body {"withdraw": bool}: stop the daemon, first
//	                                withdrawing every rule when withdraw is set (control
//	                                socket only, when WithShutdown is given; see shutdown.go)
//	GET    /debug/pprof/...         Go's runtime profiles (control socket only; pprof.go)
//
// A rule is
//
//	{"id": 12, "family": "ipv4-flowspec",
//	 "text": "match destination 203.0.113.7/32 then discard",
//	 "match": "destination 203.0.113.7/32", "action": "discard",
//	 "reason": "...", "actor": "cli", "sites": [],
//	 "state": "active|withdrawing|withdrawn|expired",
//	 "created_at": "RFC 3339", "updated_at": "RFC 3339",
//	 "expires_at": "RFC 3339 (absent: never)",
//	 "announced": true, "last_error": ""}
//
// Every error, whatever the route, is
//
//	{"error": {"code": "invalid_rule", "message": "...", "field": "text", "column": 19}}
//
// where field and column are present when they apply. Codes are stable (see
// the Code* constants); messages are for people. Status 400 is bad input
// (nothing was changed), 404 an unknown rule or route, 503 a dependency that
// cannot answer now (the database, the RIB mirror while starting, the BGP
// speaker): retry. 500 is a bug; the daemon logs it, a panic included.
package api
