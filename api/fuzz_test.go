package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
)

// Whatever the body, POST /v1/rules answers with a JSON error from the
// stable vocabulary or a rule; never a 500 (which is what a panic becomes).
func FuzzAddRule(f *testing.F) {
	for _, seed := range []string{
		`{"text":"` + ruleDiscard + `","ttl":"10m","reason":"x"}`,
		`{"text":"match destination 2001:db8::/32 protocol udp destination-port >=1024&<=2048 then rate-limit 1000"}`,
		`{"text":"match then discard"}`,
		`{"text":"match destination 203.0.113.7/32 then","ttl":"9999999h"}`,
		`{"text":"` + ruleDiscard + `","sites":["a",""]}`,
		`{"text":1}`, `null`, `[]`, `{`, `{"text":"\u0000"}`,
	} {
		f.Add(seed)
	}
	rules := newFakeRules()
	h := newAPI(nil, rules, newFakeRIB(), api.WithMaxBodyBytes(4096)).Handler()
	codes := map[string]bool{api.CodeInvalidBody: true, api.CodeInvalidRule: true, api.CodeInvalidTTL: true,
		api.CodeInvalidInput: true, api.CodeBodyTooLarge: true}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/rules", strings.NewReader(body)))
		switch w.Code {
		case http.StatusOK, http.StatusCreated:
			var r api.Rule
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.ID == 0 || r.Text == "" {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		default:
			var eb api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == nil || !codes[eb.Error.Code] || w.Code >= 500 {
				t.Fatalf("body %q: %d %s", body, w.Code, w.Body)
			}
		}
	})
}
