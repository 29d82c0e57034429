package api

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Answers of many rules (a batch of 5,000, a list of a million) are
// written without encoding/json's reflection, which cost a third of a
// batch write's handling: appendJSON writes the bytes json.Encoder
// writes with SetEscapeHTML(false), or reports false for a value it does
// not write (a time encoding/json refuses), and writeJSON encodes that
// answer with encoding/json instead. FuzzRuleListJSON holds the two to
// the same bytes.

// jsonAppender is an answer that can write its own JSON.
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, bool)
}

func (l RuleList) appendJSON(b []byte) ([]byte, bool) {
	// One allocation for the whole answer, most of the time: a rule takes
	// its text twice (text, match and action) and ~300 bytes more.
	n := 32
	for i := range l.Rules {
		n += 320 + 2*len(l.Rules[i].Text) + len(l.Rules[i].Reason)
	}
	b = slices.Grow(b, n)
	b = append(b, '{')
	if l.Order != "" {
		b = append(appendJSONString(append(b, `"order":`...), l.Order), ',')
	}
	b = append(b, `"rules":`...)
	if l.Rules == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range l.Rules {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = l.Rules[i].appendJSON(b); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	if l.Next != 0 {
		b = strconv.AppendInt(append(b, `,"next":`...), l.Next, 10)
	}
	return append(b, '}'), true
}

func (s StoredIDs) appendJSON(b []byte) ([]byte, bool) {
	b = slices.Grow(b, 32+8*len(s.IDs))
	b = append(b, `{"ids":`...)
	if s.IDs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, id := range s.IDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

func (r *Rule) appendJSON(b []byte) ([]byte, bool) {
	w := jsonWriter{b: b, ok: true}
	w.raw(`{"id":`)
	w.b = strconv.AppendInt(w.b, r.ID, 10)
	w.str(`,"family":`, r.Family)
	w.str(`,"text":`, r.Text)
	w.str(`,"match":`, r.Match)
	w.str(`,"action":`, r.Action)
	w.str(`,"reason":`, r.Reason)
	w.str(`,"actor":`, r.Actor)
	w.raw(`,"sites":`)
	w.strs(r.Sites)
	if r.Origin != "" {
		w.str(`,"origin":`, r.Origin)
	}
	if r.Set != "" {
		w.str(`,"set":`, r.Set)
	}
	w.str(`,"state":`, r.State)
	w.time(`,"created_at":`, r.CreatedAt)
	w.time(`,"updated_at":`, r.UpdatedAt)
	if r.ExpiresAt != nil {
		w.time(`,"expires_at":`, *r.ExpiresAt)
	}
	w.raw(`,"announced":`)
	w.b = strconv.AppendBool(w.b, r.Announced)
	w.str(`,"last_error":`, r.LastError)
	if len(r.Peers) > 0 {
		w.raw(`,"peers":`)
		w.strs(r.Peers)
	}
	if r.AnnouncedTo != "" {
		w.str(`,"announced_to":`, r.AnnouncedTo)
	}
	if len(r.NotSent) > 0 {
		w.raw(`,"not_sent":`)
		w.strs(r.NotSent)
	}
	if r.ShadowedBy != 0 {
		w.raw(`,"shadowed_by":`)
		w.b = strconv.AppendInt(w.b, r.ShadowedBy, 10)
	}
	if r.Precedence != 0 {
		w.raw(`,"precedence":`)
		w.b = strconv.AppendInt(w.b, int64(r.Precedence), 10)
	}
	w.raw("}")
	return w.b, w.ok
}

// jsonWriter appends JSON to b until something cannot be written as
// encoding/json would (ok false).
type jsonWriter struct {
	b  []byte
	ok bool
}

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *jsonWriter) str(key, s string) {
	w.b = appendJSONString(append(w.b, key...), s)
}

func (w *jsonWriter) strs(list []string) {
	if list == nil {
		w.raw("null")
		return
	}
	w.b = append(w.b, '[')
	for i, s := range list {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendJSONString(w.b, s)
	}
	w.b = append(w.b, ']')
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for the times it writes: a year of four digits and a zone
// offset under 24 hours, of whole minutes (the rest is left to it).
func (w *jsonWriter) time(key string, t time.Time) {
	_, off := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		w.ok = false
		return
	}
	w.b = append(w.b, key...)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

// appendJSONString appends s as a JSON string the way encoding/json
// writes it without HTML escaping: `"` and `\` escaped, \b \f \n \r \t
// by name, other control bytes as \u00XX, an invalid UTF-8 byte as
// \ufffd, U+2028 and U+2029 as \u2028 and \u2029, everything else as
// is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	plain := 0 // s[plain:i] is still to be copied as is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[plain:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
			i++
			plain = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[plain:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[plain:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&15])
		default:
			i += size
			continue
		}
		i += size
		plain = i
	}
	b = append(b, s[plain:]...)
	return append(b, '"')
}
