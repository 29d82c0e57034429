// Package ingest is the HTTP ways in for detectors' signals: the API
// mounts its handler at POST /v1/signals/{source}, where {source} is the
// name of a [[source]] of the configuration, and the source's kind says
// how the request is authenticated and read:
//
//   - webhook: the generic JSON endpoint. The request carries
//     X-Ribkeeper-Timestamp (Unix seconds) and X-Ribkeeper-Signature
//     ("sha256=" and the hex HMAC-SHA256, under the source's secret, of
//     the timestamp, a ".", and the body's bytes). It is refused (401)
//     unless the signature is right and the timestamp within the source's
//     timestamp_window of the daemon's clock; a signature already seen in
//     that window is a replay (409). The signatures seen are remembered
//     in a cache of replay_cache entries per source: when it is full of
//     signatures still inside the window, requests are refused (429,
//     Retry-After) rather than the cache growing. The body is
//     {"signals": [...]} with at most max_signals_per_request signals;
//     every signal is checked before any is passed on, so a bad one
//     refuses the request whole (400) and nothing reaches the Sink.
//   - alertmanager: Alertmanager's webhook (its JSON version 4),
//     authenticated by the source's secret as a bearer token. Each alert
//     is one signal: firing is start (ongoing when the same alert was
//     already seen firing), resolved is end; the source's labels map
//     alert labels (then annotations) to the signal's fields.
//   - fastnetmon: what contrib/fastnetmon/ribkeeper-notify.sh forwards of
//     FastNetMon's notify script call (its arguments and the attack
//     details it writes on stdin), authenticated as alertmanager: ban is
//     start, attack_details ongoing, unban end.
//
// Every signal read, and every request refused once its source is known,
// is recorded in a signals.Recent with what became of it, for operators
// (GET /v1/signals) to see what detectors sent; requests refused before
// they were authenticated, which anyone reaching the listener can send,
// are recorded at most 10 a second per source, so that they cannot push
// the source's signals out of the ring. Accepted signals go to
// the Sink given to New (the playbook engine), each with its source's
// name as Source: the actor of the rules it causes.
//
// Nothing a sender does makes the daemon hold unbounded memory: the API
// bounds the body and the connections; the signals per request, the
// replay cache and the alerts remembered as firing are capped here.
// Errors answer in the API's JSON error shape and say what to do.
package ingest
