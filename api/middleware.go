package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// statusWriter remembers whether a response has started, so a recovered
// panic knows whether it can still send a JSON 500.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverer turns a panic in next into a logged JSON 500, and logs every
// request at debug level.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path,
					"panic", v, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, errInternal())
				}
			}
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path,
				"status", sw.status, "duration", time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}

// limitBody rejects bodies over the limit: at once when Content-Length says
// so, otherwise when the handler reads past it (decodeJSON reports 413).
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, tooLarge := s.opts.maxBodyBytes, errBodyTooLarge
		if isSetPut(r) {
			limit, tooLarge = s.setBodyLimit(), errSetBodyTooLarge
		}
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			e := tooLarge(limit)
			if !isSetPut(r) {
				e = s.withBatchHint(e)
			}
			writeError(w, e)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// jsonFallback serves mux, but answers unknown routes (404) and wrong
// methods (405) with the API's JSON error instead of the mux's plain text.
func jsonFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// Let the mux decide 404 vs 405 (and the Allow header), then
		// replace its text body.
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch rec.status {
		case http.StatusMethodNotAllowed:
			writeError(w, newError(rec.status, CodeMethodNotAllowed, "",
				"method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
		case http.StatusNotFound, 0:
			writeError(w, newError(http.StatusNotFound, CodeNotFound, "", "no route %s %s", r.Method, r.URL.Path))
		default: // e.g. a redirect to a cleaned path
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
			w.Write(rec.body.Bytes())
		}
	})
}

type headerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *headerRecorder) Header() http.Header { return r.header }
func (r *headerRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *headerRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, ok := []byte(nil), false
	if a, is := v.(jsonAppender); is {
		// What encoding/json writes, faster (encode.go).
		if body, ok = a.appendJSON(nil); ok {
			body = append(body, '\n')
		}
	}
	if !ok {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // rule text has "<", ">" and "&"
		if err := enc.Encode(v); err != nil {
			// Only our own wire types are encoded; this is a bug.
			panic("api: encoding response: " + err.Error())
		}
		body = buf.Bytes()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	writeJSON(w, e.Status, ErrorBody{Error: e})
}

// instrument reports each answered request to the observer, labelled with
// the route pattern that matched (resolved before authentication, so that
// refused requests count against their route too).
func (s *Server) instrument(next http.Handler) http.Handler {
	obs := s.opts.observer
	if obs == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := "unmatched"
		if _, pattern := s.mux.Handler(r); pattern != "" {
			route = pattern
			if _, path, ok := strings.Cut(pattern, " "); ok {
				route = path
			}
		}
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			obs.APIRequest(route, r.Method, code, time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}
