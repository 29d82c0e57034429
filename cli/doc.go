// Package cli is ribkeeper's command-line client: the Client of the HTTP
// API (over the control socket or TCP with a token) and the commands an
// operator types (rule, route, peers, status, diff, shutdown), with their
// usage and output. It depends on api for the wire types and for the few
// helpers whose answer must be the daemon's own (ParseTTL, OrderText,
// OneLine, IsLoopback, the order and error-code constants); the daemon
// never imports it.
package cli
