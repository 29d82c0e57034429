package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"unicode/utf8"
)

// The body of POST /v1/rules/batch. A feed loading many rules sends
// thousands a request, and encoding/json's reflection cost a third of
// the time the API spent on a batch before the gate (measured: 0.36 of
// 1.2 CPU-s of a 100,000-rule load through the daemon), with a string,
// a pointer and a grown slice per field. decodeRules reads the body once
// and takes the shape feeds send, {"rules": [{"text": ..., "ttl": ...,
// "reason": ..., "sites": [...], "allow_unknown_sites": ...}, ...]} with
// plain strings, in one pass (fastRules); a body outside that shape (an
// escape, null, a field spelt in another case, a repeated field, a
// syntax error, anything else) is decoded by encoding/json as before, so
// that every answer, refusal and error is exactly what it was.

// decodeRules decodes a batch body into req, as decodeJSON would.
func decodeRules(r *http.Request, req *rulesRequest, limit int64) error {
	buf, err := readBody(r.Body, r.ContentLength)
	if err == nil && fastRules(buf, req) {
		return nil
	}
	*req = rulesRequest{}
	var body io.Reader = bytes.NewReader(buf)
	if err != nil {
		// Past the limit, or the connection failed: the decoder sees
		// the bytes that came and then the error, as it did reading
		// the body itself.
		body = io.MultiReader(body, errReader{err})
	}
	return decodeJSONFrom(body, req, limit)
}

// readBody reads body to its end: in one buffer of the announced length
// when there is one (the limit was checked against it before) up to
// preallocMax, growing as it comes past that, so that a client that
// announces much and sends little holds no more than what it sent. On an
// error it returns what it read before it.
func readBody(body io.Reader, length int64) ([]byte, error) {
	n := 512
	if length > 0 {
		n = int(min(length+1, preallocMax)) // room for the read that finds the end
	}
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// preallocMax is the most readBody allocates before the bytes come: a
// batch of 1,000 rules is about 120 KiB.
const preallocMax = 256 << 10

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// fastRules decodes b into req when b is a batch body of the common
// shape (see above) and reports whether it was; when it was not, req is
// left in an unspecified state. Whatever it accepts, encoding/json (with
// unknown fields refused) decodes to the same value
// (TestFastRulesAsEncodingJSON).
func fastRules(b []byte, req *rulesRequest) bool {
	s := scan{b: b}
	if !s.byte('{') {
		return false
	}
	if k, ok := s.str(); !ok || string(k) != "rules" || !s.byte(':') || !s.byte('[') {
		return false
	}
	// Each rule is an object, inside the body's own.
	rules := make([]ruleRequest, 0, max(bytes.Count(b, []byte{'{'})-1, 0))
	var shared sharedStrings
	if !s.byte(']') {
		for {
			var r ruleRequest
			if !s.rule(&r, &shared) {
				return false
			}
			rules = append(rules, r)
			if s.byte(',') {
				continue
			}
			if !s.byte(']') {
				return false
			}
			break
		}
	}
	if !s.byte('}') {
		return false
	}
	s.ws()
	if s.i != len(b) {
		return false
	}
	req.Rules = rules
	return true
}

// sharedStrings hands out one string for a ttl or reason that repeats
// from rule to rule (a batch's rules mostly share theirs), and the
// pointers the request fields are, from one array.
type sharedStrings struct {
	ttl, reason string
	slab        []string
}

func (sh *sharedStrings) ptr(last *string, v []byte) *string {
	if string(v) != *last {
		*last = string(v)
	}
	if len(sh.slab) == 0 {
		sh.slab = make([]string, 256)
	}
	p := &sh.slab[0]
	sh.slab = sh.slab[1:]
	*p = *last
	return p
}

// scan reads JSON of the common shape from b at i.
type scan struct {
	b []byte
	i int
}

// ws skips JSON's white space.
func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte skips white space and then c, if c is next.
func (s *scan) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// word skips white space and then w, if w is next.
func (s *scan) word(w string) bool {
	s.ws()
	if bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		s.i += len(w)
		return true
	}
	return false
}

// str reads a string. One whose bytes are its value (valid UTF-8
// without an escape) is returned as it is in b; one with escapes (a Go
// client writes <, > and & as \u003c, \u003e, \u0026) or invalid UTF-8
// is unquoted by encoding/json itself, so that it means what it always
// did. A control character is refused, as encoding/json refuses it.
func (s *scan) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start, plain := s.i, true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			s.i = j + 1
			if plain || utf8.Valid(v) && bytes.IndexByte(v, '\\') < 0 {
				return v, true
			}
			var u string
			if json.Unmarshal(s.b[start-1:j+1], &u) != nil {
				return nil, false
			}
			return []byte(u), true
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	return nil, false
}

// rule reads one rule's object into r.
func (s *scan) rule(r *ruleRequest, sh *sharedStrings) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	var seen [5]bool
	for {
		k, ok := s.str()
		if !ok || !s.byte(':') {
			return false
		}
		f := -1
		switch string(k) {
		case "text":
			f = 0
			v, ok := s.str()
			if !ok {
				return false
			}
			r.Text = string(v)
		case "ttl":
			f = 1
			v, ok := s.str()
			if !ok {
				return false
			}
			r.TTL = sh.ptr(&sh.ttl, v)
		case "reason":
			f = 2
			v, ok := s.str()
			if !ok {
				return false
			}
			r.Reason = sh.ptr(&sh.reason, v)
		case "sites":
			f = 3
			sites, ok := s.strings()
			if !ok {
				return false
			}
			r.Sites = &sites
		case "allow_unknown_sites":
			f = 4
			switch {
			case s.word("true"):
				r.AllowUnknownSites = true
			case s.word("false"):
			default:
				return false
			}
		default:
			return false
		}
		if seen[f] {
			return false // encoding/json keeps the last; leave that to it
		}
		seen[f] = true
		if s.byte(',') {
			continue
		}
		return s.byte('}')
	}
}

// strings reads an array of strings (empty, not nil, when it has none,
// as encoding/json decodes []).
func (s *scan) strings() ([]string, bool) {
	if !s.byte('[') {
		return nil, false
	}
	out := []string{}
	if s.byte(']') {
		return out, true
	}
	for {
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		out = append(out, string(v))
		if s.byte(',') {
			continue
		}
		return out, s.byte(']')
	}
}

// decodeJSONFrom is decodeJSON of body.
func decodeJSONFrom(body io.Reader, v any, limit int64) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Anything after the object is a mistake, not something to ignore.
		if err = dec.Decode(&struct{}{}); err == io.EOF {
			return nil
		}
		if err == nil {
			err = errUnexpectedData
		}
	}
	return jsonError(err, errBodyTooLarge(limit))
}
