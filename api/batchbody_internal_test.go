package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// batchBody is a batch of n rules as a feed sends it.
func batchBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"rules":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"text":"match destination 10.0.%d.%d/32 protocol ==17 destination-port ==53 then discard","ttl":"1h","reason":"bench"}`, i>>8&255, i&255)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// asJSON decodes b as decodeJSON does.
func asJSON(b []byte) (rulesRequest, error) {
	var want rulesRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&want)
	if err == nil && dec.More() {
		err = errUnexpectedData
	}
	return want, err
}

// checkFast fails when fastRules accepts b and encoding/json does not
// decode it to the same value; it reports whether fastRules took it.
func checkFast(t *testing.T, b []byte) bool {
	t.Helper()
	var got rulesRequest
	if !fastRules(b, &got) {
		return false
	}
	want, err := asJSON(b)
	if err != nil {
		t.Fatalf("fastRules took %q, which encoding/json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fastRules(%q) = %#v, encoding/json: %#v", b, got, want)
	}
	return true
}

// TestFastRulesAsEncodingJSON: the batch bodies feeds send are decoded
// in one pass, to what encoding/json makes of them; anything else is
// left to encoding/json.
func TestFastRulesAsEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"rules":[]}`, true},
		{` { "rules" : [ ] } ` + "\n", true},
		{`{"rules":[{}]}`, true},
		{`{"rules":[{"text":"match destination 192.0.2.1/32 then discard"}]}`, true},
		{`{"rules":[{"text":"a","ttl":"1h","reason":"r","sites":["x","y"],"allow_unknown_sites":true},{"text":"b","ttl":"1h","reason":"r2","sites":[],"allow_unknown_sites":false}]}`, true},
		{"{\"rules\":[{\"text\":\"route 192.0.2.1/32 then blackhole\",\t\"reason\" :\r\n\"é 日本\"}]}", true},
		{`{"rules":[{"text":"a","reason":""},{"text":"b","reason":""},{"text":"c","ttl":""}]}`, true},
		// Escapes, unquoted by encoding/json (a Go client escapes <, >, &).
		{`{"rules":[{"text":"a\"b\\c\/d\n"}]}`, true},
		{`{"rules":[{"text":"match destination-port \u003e=1024\u0026\u003c=2048 then discard","reason":"\ud83d\ude00 \ud800"}]}`, true},
		{`{"rules":[{"t\u0065xt":"a"}]}`, true},
		{"{\"rules\":[{\"text\":\"a\xffb\"}]}", true}, // invalid UTF-8 becomes U+FFFD
		// Left to encoding/json:
		{`{"rules":[{"text":"a\x"}]}`, false},               // a bad escape
		{`{"rules":[{"text":"a\u00"}]}`, false},             // a bad escape
		{`{"rules":[{"text":"a\`, false},                    // truncated in an escape
		{`{"rules":[{"text":"a","ttl":null}]}`, false},      // null
		{`{"rules":null}`, false},                           // null
		{`{"rules":[{"Text":"a"}]}`, false},                 // another case
		{`{"rules":[{"text":"a","text":"b"}]}`, false},      // repeated
		{`{"rules":[{"text":"a","sites":["x",1]}]}`, false}, // a type error
		{`{"rules":[{"text":"a","allow_unknown_sites":1}]}`, false},
		{`{"rules":[{"text":"a","extra":1}]}`, false},  // unknown field
		{`{"rules":[],"extra":1}`, false},              // unknown field
		{`{"rules":[{"text":"a"}]}{}`, false},          // data after
		{`{"rules":[{"text":"a"},]}`, false},           // syntax
		{`{"rules":[{"text":"a"}]`, false},             // truncated
		{"{\"rules\":[{\"text\":\"a\x01b\"}]}", false}, // control character
		{`{"rules":[{"text":"a","allow_unknown_sites":truex}]}`, false},
		{``, false},
		{`[]`, false},
	} {
		if got := checkFast(t, []byte(tc.body)); got != tc.fast {
			t.Errorf("fastRules(%q) took it: %v, want %v", tc.body, got, tc.fast)
		}
	}
	if !checkFast(t, batchBody(1000)) {
		t.Fatal("a feed's batch of 1,000 rules was left to encoding/json")
	}
	// The Go client's (cli) batch, whose encoder escapes <, > and &.
	goBody, err := json.Marshal(AddRulesRequest{Rules: []AddRuleRequest{
		{Text: "match destination 192.0.2.0/24 destination-port >=1024&<=2048 then discard", TTL: "10m", Reason: "<feed> & co", Sites: []string{"a"}},
		{Text: "route 192.0.2.1/32 then blackhole", Clear: []string{"reason", "ttl", "sites"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !checkFast(t, goBody) {
		t.Fatalf("the Go client's batch %s was left to encoding/json", goBody)
	}
}

// FuzzFastRules: whatever fastRules accepts, encoding/json decodes to the
// same value.
func FuzzFastRules(f *testing.F) {
	for _, s := range []string{
		`{"rules":[{"text":"a","ttl":"1h","reason":"r","sites":["x"],"allow_unknown_sites":true}]}`,
		`{"rules":[{},{"text":"é"}]}`, `{"rules":[]}`, `{"rules":[{"text":"a\"b"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Add(batchBody(3))
	f.Fuzz(func(t *testing.T, b []byte) { checkFast(t, b) })
}

// TestDecodeRulesAsDecodeJSON: decodeRules answers every body as
// decodeJSON does, refusals included, and a body past the limit the same.
func TestDecodeRulesAsDecodeJSON(t *testing.T) {
	const limit = 4096
	for _, body := range []string{
		`{"rules":[{"text":"a","ttl":"1h"}]}`,
		`{"rules":[{"text":"a\"b","ttl":null}]}`,
		`{"rules":[{"text":"a","extra":1}]}`,
		`{"rules":[{"text":"a","sites":["x",1]}]}`,
		`{"rules":[{"text":"a"}]}{}`,
		`{"rules":[{"text":"a"},]}`,
		`{"rules":[{"text":"a"}]`,
		``,
		`{"rules":[{"text":"` + strings.Repeat("x", 2*limit) + `"}]}`,
		`{"rules":[{"text":1},{"text":"` + strings.Repeat("x", 2*limit) + `"}]}`,
	} {
		for _, chunked := range []bool{false, true} {
			decode := func(f func(*http.Request, *rulesRequest, int64) error) (rulesRequest, string) {
				r := httptest.NewRequest(http.MethodPost, "/v1/rules/batch", strings.NewReader(body))
				if chunked {
					r.ContentLength = -1
				}
				r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, limit)
				var req rulesRequest
				err := f(r, &req, limit)
				return req, fmt.Sprint(err)
			}
			got, gerr := decode(decodeRules)
			want, werr := decode(func(r *http.Request, v *rulesRequest, l int64) error { return decodeJSON(r, v, l) })
			if gerr != werr || (werr == "<nil>" && !reflect.DeepEqual(got, want)) {
				t.Errorf("body %.60q (chunked %v): decodeRules %#v, %s; decodeJSON %#v, %s", body, chunked, got, gerr, want, werr)
			}
		}
	}
}

// BenchmarkDecodeRules: one batch of 1,000 rules as a feed sends it.
func BenchmarkDecodeRules(b *testing.B) {
	body := batchBody(1000)
	for _, tc := range []struct {
		name string
		f    func(*http.Request, *rulesRequest, int64) error
	}{
		{"fast", decodeRules},
		{"encoding-json", func(r *http.Request, v *rulesRequest, l int64) error { return decodeJSON(r, v, l) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/rules/batch", bytes.NewReader(body))
				var req rulesRequest
				if err := tc.f(r, &req, 1<<24); err != nil || len(req.Rules) != 1000 {
					b.Fatal(err, len(req.Rules))
				}
			}
		})
	}
}

// TestReadBodyHoldsWhatCame: a body that announces more than it sends
// costs what it sent, not what it announced (up to preallocMax), and one
// past preallocMax is read whole.
func TestReadBodyHoldsWhatCame(t *testing.T) {
	b, err := readBody(strings.NewReader("abc"), 64<<20)
	if err != nil || string(b) != "abc" || cap(b) > preallocMax {
		t.Fatalf("readBody of 3 bytes announced as 64 MiB: %q, cap %d, %v; want a buffer of at most %d", b, cap(b), err, preallocMax)
	}
	big := strings.Repeat("x", 3*preallocMax)
	if b, err = readBody(strings.NewReader(big), int64(len(big))); err != nil || string(b) != big {
		t.Fatalf("readBody of %d bytes: %d bytes, %v", len(big), len(b), err)
	}
}
