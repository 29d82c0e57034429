package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/ingest"
	"github.com/ribkeeper/ribkeeper/notify"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

// The OpenAPI document is checked against the code, not against itself:
// the routes every non-test Go file of the module registers, the error
// codes package api declares, and the answers the handlers give. The
// schemas use a small subset of OpenAPI 3.0 (type, properties, required,
// additionalProperties, items, enum, format date-time, minimum, $ref),
// which schemaCheck below implements; it fails on any other keyword, so
// that a schema it cannot check is not silently passed.

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(api.OpenAPI()))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		t.Fatalf("openapi.json: openapi %q, want 3.0.x", v)
	}
	return doc
}

var methods = []string{"get", "put", "post", "delete", "patch", "head"}

// documented returns "METHOD /path" of every operation of doc.
func documented(doc map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for path, item := range doc["paths"].(map[string]any) {
		for _, m := range methods {
			if op, ok := item.(map[string]any)[m].(map[string]any); ok {
				out[strings.ToUpper(m)+" "+path] = op
			}
		}
	}
	return out
}

// registered returns the patterns of every route a non-test Go file of
// the module registers with Handle or HandleFunc; a pattern that is not a
// string literal is an error, since it could not be checked.
func registered(t *testing.T) map[string]string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Nested modules (tools/) and hidden directories are not the daemon.
			if path != root && (strings.HasPrefix(d.Name(), ".") || fileExists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			where := fset.Position(call.Pos()).String()
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: a route registered with a pattern that is not a string literal: write the pattern out, so that the OpenAPI check sees it", where)
				return true
			}
			pattern, _ := strconv.Unquote(lit.Value)
			if _, path, ok := strings.Cut(pattern, " "); ok && strings.HasPrefix(path, "/v1/") {
				out[pattern] = where
			} else if strings.HasPrefix(pattern, "/v1/") {
				t.Errorf("%s: route %q has no method: give one (\"GET %s\") so that it can be documented", where, pattern, pattern)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 || len(out) == 0 {
		t.Fatalf("scanned %d files under %s and found %d routes: the scan is broken", files, root, len(out))
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Every /v1 route the code registers is documented, and every documented
// route is registered.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := documented(doc)
	regs := registered(t)
	for pattern, where := range regs {
		// The mux's {id} is OpenAPI's {id}; "{rest...}" would need care.
		if _, ok := ops[pattern]; !ok {
			t.Errorf("route %q (%s) is not in api/openapi.json: document it (operation, parameters, request and response schemas, an example)", pattern, where)
		}
	}
	for key := range ops {
		if _, ok := regs[key]; !ok {
			t.Errorf("api/openapi.json documents %q, which no code registers: remove it, or register the route", key)
		}
	}
	// Every operation says what it answers, with an id; path parameters
	// are declared.
	for key, op := range ops {
		if id, _ := op["operationId"].(string); id == "" {
			t.Errorf("%s: no operationId", key)
		}
		rs, _ := op["responses"].(map[string]any)
		if len(rs) == 0 {
			t.Errorf("%s: no responses", key)
		}
		for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(key, -1) {
			found := false
			for _, p := range op["parameters"].([]any) {
				p = resolve(t, doc, p)
				pm := p.(map[string]any)
				found = found || pm["in"] == "path" && pm["name"] == m[1]
			}
			if !found {
				t.Errorf("%s: path parameter %s is not declared", key, m[1])
			}
		}
	}
	checkRefs(t, doc, doc, "#")
}

// Every error code package api declares is in the Error schema's enum.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	enum := schemaAt(t, doc, "Error")["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(node ast.Node) bool {
				vs, ok := node.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					code, _ := strconv.Unquote(lit.Value)
					n++
					if !slices.Contains(enum, any(code)) {
						t.Errorf("error code %s = %q is not in the Error schema's code enum of api/openapi.json", name.Name, code)
					}
				}
				return true
			})
		}
	}
	if n < 20 {
		t.Fatalf("found %d Code constants: the scan is broken", n)
	}
}

// Every example in the document is valid against its schema.
func TestOpenAPIExamples(t *testing.T) {
	doc := loadOpenAPI(t)
	n := 0
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ex, ok := v["example"]; ok {
				if s, ok := v["schema"]; ok {
					n++
					for _, e := range schemaCheck(t, doc, s, ex, at+".example") {
						t.Error(e)
					}
				}
			}
			for k, c := range v {
				walk(c, at+"."+k)
			}
		case []any:
			for i, c := range v {
				walk(c, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(doc["paths"], "paths")
	walk(doc["components"], "components")
	if n < 20 {
		t.Fatalf("checked %d examples: want one for each answer", n)
	}
}

// The answers the handlers give match the documented schemas: a field
// added to a wire type without documentation fails here.
// minimal, at the end of a case's path, sends it with "Prefer:
// return=minimal".
const minimal = " (Prefer: return=minimal)"

func TestOpenAPIMatchesAnswers(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := documented(doc)
	ts := startServer(t)
	ts.rib.setReady(true)
	ts.rib.announce(mustParse(t, "match destination 203.0.113.7/32 then discard"))
	now := time.Now()
	ts.rib.setPeers([]bgp.PeerStatus{
		{Address: "192.0.2.1", ASN: 65000, State: "established", Uptime: time.Hour, Families: []string{"ipv4-flowspec"}, Sent: 1, Since: now, Profile: "junos", MaxPrefixes: 100},
		{Address: "192.0.2.2", ASN: 65001, State: "active", LastError: "hold timer expired", LastErrorAt: now, Flaps: 2, Hint: "check the router", PrefixLimited: true},
	})
	rule := `{"text":"match destination 203.0.113.7/32 protocol udp source-port 53 then discard","ttl":"1h","reason":"ticket 42"}`
	for _, c := range []struct{ method, route, path, body string }{
		{"POST", "/v1/rules", "/v1/rules", rule},
		{"POST", "/v1/rules", "/v1/rules", rule},
		{"POST", "/v1/rules/batch", "/v1/rules/batch", `{"rules":[` + rule + `,{"text":"route 198.51.100.9/32 then blackhole","sites":[]}]}`},
		{"POST", "/v1/rules/batch", "/v1/rules/batch" + minimal, `{"rules":[` + rule + `,{"text":"route 198.51.100.11/32 then blackhole"}]}`},
		{"GET", "/v1/rules", "/v1/rules", ""},
		{"GET", "/v1/rules", "/v1/rules?order=precedence&state=active", ""},
		{"GET", "/v1/rules", "/v1/rules?limit=1", ""},
		{"GET", "/v1/rules/{id}", "/v1/rules/1", ""},
		{"GET", "/v1/rules/{id}/history", "/v1/rules/1/history", ""},
		{"GET", "/v1/rib", "/v1/rib", ""},
		{"GET", "/v1/peers", "/v1/peers", ""},
		{"GET", "/v1/status", "/v1/status", ""},
		{"GET", "/v1/whoami", "/v1/whoami", ""},
		{"POST", "/v1/validate", "/v1/validate", rule},
		{"POST", "/v1/validate", "/v1/validate", `{"text":"match destination 0.0.0.0/0 then discard"}`},
		{"POST", "/v1/rules/withdraw", "/v1/rules/withdraw", `{"text":"route 198.51.100.9/32 then blackhole"}`},
		{"POST", "/v1/rules/withdraw/batch", "/v1/rules/withdraw/batch", `{"rules":[{"text":"route 198.51.100.9/32 then blackhole"},{"text":"match destination 203.0.113.7/32 protocol udp source-port 53 then discard"}]}`},
		{"POST", "/v1/rules/withdraw/batch", "/v1/rules/withdraw/batch", `{"rules":[{"text":"route 198.51.100.9/32 then"}]}`},
		{"DELETE", "/v1/rules/{id}", "/v1/rules/2", ""},
		{"PUT", "/v1/sets/{name}", "/v1/sets/feed-a", `{"rules":[{"text":"route 198.51.100.10/32 then blackhole","ttl":"1h"}]}`},
		{"GET", "/v1/sets", "/v1/sets", ""},
		{"GET", "/v1/sets/{name}", "/v1/sets/feed-a", ""},
		{"DELETE", "/v1/sets/{name}", "/v1/sets/feed-a", ""},
		// Errors: each is an ErrorBody.
		{"GET", "/v1/rules/{id}", "/v1/rules/99", ""},
		{"GET", "/v1/rules/{id}", "/v1/rules/x", ""},
		{"GET", "/v1/rules", "/v1/rules?state=bogus", ""},
		{"POST", "/v1/rules", "/v1/rules", `{"text":"match destination 203.0.113.7/32 protocl udp then discard"}`},
		{"POST", "/v1/rules", "/v1/rules", `{"text":"match destination 0.0.0.0/0 then discard"}`},
		{"POST", "/v1/rules", "/v1/rules", `{"text":"` + strings.Repeat("x", 5000) + `"}`},
	} {
		var status int
		var body []byte
		if path, ok := strings.CutSuffix(c.path, minimal); ok {
			status, body = ts.doHeader(t, c.method, path, c.body, "Prefer", "return=minimal")
		} else {
			status, body = ts.do(t, c.method, c.path, c.body)
		}
		t.Logf("%s %s: %d", c.method, c.path, status)
		op := ops[c.method+" "+c.route]
		if op == nil {
			t.Errorf("%s %s is not documented", c.method, c.route)
			continue
		}
		resp, ok := op["responses"].(map[string]any)[strconv.Itoa(status)]
		if !ok {
			t.Errorf("%s %s answered %d, which api/openapi.json does not document: %s", c.method, c.path, status, body)
			continue
		}
		schema := resolve(t, doc, resp).(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		for _, e := range schemaCheck(t, doc, schema, v, fmt.Sprintf("%s %s (%d)", c.method, c.path, status)) {
			t.Errorf("%s\n  answer: %s", e, body)
		}
	}
}

// Every documented route is served, on the control socket's full chain
// (shutdown, events and series included), and the document is public on
// TCP while the other routes still need a token.
func TestOpenAPIServed(t *testing.T) {
	doc := loadOpenAPI(t)
	ev := api.NewEvents(nil, nil, nil, nil)
	se := api.NewSeries(nil, api.SeriesSources{}, time.Second, 10, nil)
	recent := signals.NewRecent(0)
	ways, err := ingest.New(nil, nil, &takeAll{}, recent, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerOver(t, newFakeRules(), api.WithEvents(ev), api.WithSeries(se), api.WithShutdown(refusingShutdown{}),
		api.WithSignals(ways, recent))
	ts.rib.setReady(true)
	for key := range documented(doc) {
		method, path, _ := strings.Cut(key, " ")
		path = strings.ReplaceAll(path, "{id}", "1")
		var body string
		if method == "POST" {
			body = `{"not_a_field":1}` // routed handlers answer 400 invalid_body
		}
		status, b := ts.doStream(t, method, path, body)
		var eb api.ErrorBody
		json.Unmarshal(b, &eb)
		if status == http.StatusMethodNotAllowed || eb.Error != nil && strings.HasPrefix(eb.Error.Message, "no route ") {
			t.Errorf("%s is documented but not served: %d %s", key, status, b)
		}
	}

	srv := newAPI(nil, newFakeRules(), newFakeRIB())
	h, err := srv.TCPHandler([]api.Token{{Name: "ro", Role: api.RoleRead, Secret: custSecret}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+api.OpenAPIPath, nil))
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), api.OpenAPI()) || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET %s over TCP without a token: %d %.80s", api.OpenAPIPath, rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/v1/rules", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /v1/rules over TCP without a token: %d, want 401", rec.Code)
	}
}

// refusingShutdown is a Shutdowner that must not be reached: the test
// only checks the route exists.
type refusingShutdown struct{}

func (refusingShutdown) Shutdown(ctx context.Context, withdraw bool) error {
	return fmt.Errorf("not in this test")
}

// doStream is do for routes that may stream: it reads what the answer
// has after its headers, up to a second's worth, then hangs up.
func (ts *testServer) doStream(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	if path != "/v1/events" {
		return ts.do(t, method, path, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "http://rk"+path, nil)
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// schemaAt is the component schema name.
func schemaAt(t *testing.T, doc map[string]any, name string) map[string]any {
	t.Helper()
	s, ok := doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	return s
}

// resolve follows v's $ref, if it has one.
func resolve(t *testing.T, doc map[string]any, v any) any {
	t.Helper()
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		var cur any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("$ref %s does not resolve", ref)
			}
			if cur, ok = cm[part]; !ok {
				t.Fatalf("$ref %s does not resolve", ref)
			}
		}
		v = cur
	}
	t.Fatalf("$ref chain too long at %v", v)
	return nil
}

// checkRefs resolves every $ref of v.
func checkRefs(t *testing.T, doc map[string]any, v any, at string) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$ref"]; ok {
			resolve(t, doc, v)
		}
		for k, c := range v {
			checkRefs(t, doc, c, at+"/"+k)
		}
	case []any:
		for _, c := range v {
			checkRefs(t, doc, c, at)
		}
	}
}

// schemaKeywords are the keywords schemaCheck understands.
var schemaKeywords = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "format": true, "minimum": true, "description": true, "$ref": true, "oneOf": true}

// schemaCheck validates v against schema and returns what is wrong, each
// naming where.
func schemaCheck(t *testing.T, doc map[string]any, schema, v any, at string) []string {
	t.Helper()
	s, ok := resolve(t, doc, schema).(map[string]any)
	if !ok {
		return []string{at + ": schema is not an object"}
	}
	var errs []string
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !schemaKeywords[k] {
			errs = append(errs, fmt.Sprintf("%s: schema keyword %q is not one the test checks: extend schemaCheck", at, k))
		}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		// Exactly one of the alternatives holds; the schema has nothing else.
		var fits []int
		var why []string
		for i, alt := range alts {
			e := schemaCheck(t, doc, alt, v, fmt.Sprintf("%s (oneOf[%d])", at, i))
			if len(e) == 0 {
				fits = append(fits, i)
			}
			why = append(why, e...)
		}
		switch {
		case len(keys) != 1:
			errs = append(errs, fmt.Sprintf("%s: oneOf with other keywords (%v) is not one the test checks", at, keys))
		case len(fits) == 0:
			errs = append(errs, fmt.Sprintf("%s: fits none of oneOf: %s", at, strings.Join(why, "; ")))
		case len(fits) > 1:
			errs = append(errs, fmt.Sprintf("%s: fits several of oneOf (%v): make them exclusive", at, fits))
		}
		return errs
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", at, v, enum))
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want an object", at, v))
		}
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		for _, r := range required {
			if _, ok := m[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required field %q is missing", at, r))
			}
		}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if ps, ok := props[k]; ok {
				errs = append(errs, schemaCheck(t, doc, ps, m[k], at+"."+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, fmt.Sprintf("%s: field %q is not in the schema: document it in api/openapi.json", at, k))
				}
			case map[string]any:
				errs = append(errs, schemaCheck(t, doc, ap, m[k], at+"."+k)...)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want an array", at, v))
		}
		for i, e := range a {
			errs = append(errs, schemaCheck(t, doc, s["items"], e, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want a string", at, v))
		}
		if s["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %q is not an RFC 3339 time", at, str))
			}
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want a %s", at, v, typ))
		}
		f, err := n.Float64()
		if _, ierr := n.Int64(); typ == "integer" && ierr != nil || err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s is not an %s", at, n, typ))
		}
		if min, ok := s["minimum"].(json.Number); ok {
			if mf, _ := min.Float64(); f < mf {
				errs = append(errs, fmt.Sprintf("%s: %s is below the minimum %s", at, n, min))
			}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, fmt.Sprintf("%s: %T, want a boolean", at, v))
		}
	default:
		errs = append(errs, fmt.Sprintf("%s: schema type %q is not one the test checks", at, typ))
	}
	return errs
}

// The checker itself finds what it must: a missing required field, an
// undocumented field, a wrong type, a value outside an enum.
func TestSchemaCheckFinds(t *testing.T) {
	doc := loadOpenAPI(t)
	rule := map[string]any{"$ref": "#/components/schemas/Rule"}
	good := func() map[string]any {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(`{"id":1,"family":"ipv4-flowspec","text":"t","match":"m","action":"discard","reason":"","actor":"cli","sites":[],"state":"active","created_at":"2026-11-25T19:40:00Z","updated_at":"2026-11-25T19:40:00Z","announced":false,"last_error":""}`))
		dec.UseNumber()
		dec.Decode(&m)
		return m
	}
	if errs := schemaCheck(t, doc, rule, good(), "rule"); len(errs) != 0 {
		t.Fatalf("a good rule: %v", errs)
	}
	for name, change := range map[string]func(m map[string]any){
		"missing":  func(m map[string]any) { delete(m, "state") },
		"extra":    func(m map[string]any) { m["colour"] = "red" },
		"type":     func(m map[string]any) { m["id"] = "1" },
		"enum":     func(m map[string]any) { m["state"] = "asleep" },
		"time":     func(m map[string]any) { m["created_at"] = "yesterday" },
		"items":    func(m map[string]any) { m["sites"] = []any{json.Number("1")} },
		"fraction": func(m map[string]any) { m["id"] = json.Number("1.5") },
	} {
		m := good()
		change(m)
		if errs := schemaCheck(t, doc, rule, m, "rule"); len(errs) == 0 {
			t.Errorf("%s: the checker found nothing wrong", name)
		}
	}
}

type openapiStore struct{}

func (openapiStore) Refusal() *store.RefusedError {
	return &store.RefusedError{Kind: "corrupt", Msg: "the database failed its integrity check: restore it from a backup"}
}
func (openapiStore) Integrity() *store.IntegrityResult {
	return &store.IntegrityResult{At: time.Now(), Corrupt: true, Problem: "page 7: btree cell overflow"}
}
func (openapiStore) LateCommits() uint64 { return 1 }

type openapiNotify struct{}

func (openapiNotify) Status() []notify.TargetStatus {
	now := time.Now()
	return []notify.TargetStatus{{Name: "soc", Kind: "webhook", Queued: 2, Delivered: 7, Retries: 3, LastError: "503", LastErrAt: now, LastOKAt: now, NextTry: now}}
}

// The parts of GET /v1/status shown only when configured (the store's
// condition, the notification receivers) match the document too.
func TestOpenAPIStatusSections(t *testing.T) {
	doc := loadOpenAPI(t)
	op := documented(doc)["GET /v1/status"]
	ts := startServerOver(t, newFakeRules(), api.WithStoreCondition(openapiStore{}), api.WithNotifications(openapiNotify{}))
	status, body := ts.do(t, "GET", "/v1/status", "")
	if status != http.StatusOK || !strings.Contains(string(body), `"notifications"`) || !strings.Contains(string(body), `"integrity"`) {
		t.Fatalf("status %d: %s", status, body)
	}
	resp := op["responses"].(map[string]any)["200"]
	schema := resolve(t, doc, resp).(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, e := range schemaCheck(t, doc, schema, v, "GET /v1/status") {
		t.Errorf("%s\n  answer: %s", e, body)
	}
}
