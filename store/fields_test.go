package store

import (
	"encoding/json"
	"testing"
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
