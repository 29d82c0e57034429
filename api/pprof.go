package api

import (
	"net/http"
	"net/http/pprof"
)

// withProfiling serves Go's runtime profiles under /debug/pprof/ next to
// h. Only the control socket gets it: the socket is 0600 (whoever can
// open it can already change every rule), while the TCP listener is
// reachable by token holders who need not see the process's memory.
//
//	curl --unix-socket /run/ribkeeper/api.sock http://x/debug/pprof/heap > heap.pb.gz
//	go tool pprof -top heap.pb.gz
func withProfiling(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
