package store

import (
	"encoding/json"
	"testing"
	"time"
)

// encodeFields must write what json.Marshal would, for any keys and
// values (the history reader decodes it with encoding/json).
func FuzzEncodeFields(f *testing.F) {
	f.Add("state", "active", "text", "match destination 10.0.0.1/32 then discard")
	f.Add("a\"b", "c\\\\d", "\x01\n\t", "<&>\u2028")
	f.Add("k", "\xff", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m := map[string]string{k1: v1, k2: v2}
		got := encodeFields(m).(string)
		var back map[string]string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Fatalf("encodeFields(%q) = %s: not JSON: %v", m, got, err)
		}
		want, _ := json.Marshal(m)
		var wantBack map[string]string
		json.Unmarshal(want, &wantBack)
		if len(back) != len(wantBack) {
			t.Fatalf("encodeFields(%q) decodes to %q, json.Marshal's to %q", m, back, wantBack)
		}
		for k, v := range wantBack {
			if back[k] != v {
				t.Fatalf("encodeFields(%q) decodes to %q, json.Marshal's to %q", m, back, wantBack)
			}
		}
	})
}

func TestEncodeFieldsNil(t *testing.T) {
	if encodeFields(nil) != nil {
		t.Fatal("nil map must be stored as NULL")
	}
	if got := encodeFields(map[string]string{"b": "2", "a": "1"}); got != `{"a":"1","b":"2"}` {
		t.Fatalf("got %v", got)
	}
}

// createdFields must store exactly what encodeFields(ruleFields(r))
// stores, for any text, reason, origin, set, sites and expiry.
func FuzzCreatedFields(f *testing.F) {
	f.Add("match destination 10.0.0.1/32 then discard", "ddos", "", "", "", int64(0), false)
	f.Add("a\"b\\c", "\x01\n<&>\u2028", "config:ams", "feed", "ams", int64(1767225600123456789), true)
	f.Add("\xff", "r", "o\xfe", "s", "x\xff", int64(-1), false)
	f.Fuzz(func(t *testing.T, text, reason, origin, set, site string, expires int64, wr bool) {
		r := Rule{Text: text, Reason: reason, Origin: origin, Set: set, WithdrawRequested: wr}
		if site != "" {
			r.Sites = []string{site, "b"}
		}
		if expires != 0 {
			r.ExpiresAt = time.Unix(0, expires).In(time.FixedZone("x", 3600))
		}
		if got, want := createdFields(r), encodeFields(ruleFields(r)); got != want {
			t.Fatalf("createdFields = %v\nencodeFields(ruleFields) = %v", got, want)
		}
	})
}
