package api_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ribkeeper/ribkeeper/api"

	"github.com/ribkeeper/ribkeeper/store"
)

// hostile holds what a reason must not carry: NUL, an ESC sequence that
// clears the screen, a bidi override, a C1 control, DEL, invalid UTF-8.
var hostile = []string{"a\x00b", "\x1b[2J\x1b[Hgotcha", "evil\u202eexe.txt", "c1\u009bx", "del\x7f", "bad\xffutf8", "two\nlines"}

// Stored free text is refused on every write path with a 400 naming the
// field; nothing is stored.
func TestFreeTextValidated(t *testing.T) {
	ts, st := sqliteServer(t)
	for _, r := range hostile {
		if !utf8.ValidString(r) {
			continue // JSON decoding turns it into U+FFFD: printable
		}
		body := `{"text":"` + ruleDiscard + `","reason":` + jsonString(r) + `}`
		status, resp := ts.do(t, "POST", "/v1/rules", body)
		if e := wantError(t, status, resp, 400, api.CodeInvalidInput); e.Field != "reason" || !strings.Contains(e.Message, "reason") {
			t.Errorf("reason %q: error %+v, want field reason", r, e)
		}
		status, resp = ts.do(t, "POST", "/v1/rules/batch", `{"rules":[{"text":"`+ruleOther+`"},{"text":"`+ruleDiscard+`","reason":`+jsonString(r)+`}]}`)
		if e := wantError(t, status, resp, 400, api.CodeInvalidInput); e.Field != "rules[1].reason" {
			t.Errorf("batch reason %q: field %q, want rules[1].reason", r, e.Field)
		}
	}
	long := strings.Repeat("x", store.MaxReasonBytes+1)
	status, resp := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`","reason":"`+long+`"}`)
	if e := wantError(t, status, resp, 400, api.CodeInvalidInput); e.Field != "reason" || !strings.Contains(e.Message, "512") {
		t.Errorf("long reason: %+v", e)
	}
	// Printable text of every script, at the limit, is fine.
	ok := "DNS-Verstärkung ✓ 攻撃 " + strings.Repeat("y", store.MaxReasonBytes-len("DNS-Verstärkung ✓ 攻撃 "))
	if status, resp := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`","reason":"`+ok+`"}`); status != 201 {
		t.Fatalf("printable reason: %d %s", status, resp)
	}
	if all, _ := st.List(t.Context(), ""); len(all) != 1 {
		t.Fatalf("%d rules stored, want only the good one", len(all))
	}
	// The store itself refuses, whoever writes: typed errors carry the field.
	_, _, err := st.Upsert(t.Context(), store.Input{Rule: mustParse(t, ruleOther), Reason: hostile[1]})
	var ie *store.InputError
	if !asInputError(err, &ie) || ie.Field != "reason" || ie.Index != -1 {
		t.Errorf("store.Upsert with ESC in reason: %v", err)
	}
	_, err = st.UpsertMany(t.Context(), []store.Input{{Rule: mustParse(t, ruleOther)}, {Rule: mustParse(t, ruleLimit), Actor: "x\x1by"}})
	if !asInputError(err, &ie) || ie.Field != "actor" || ie.Index != 1 {
		t.Errorf("store.UpsertMany with ESC in actor: %v", err)
	}
}

// Rows stored before the check existed may hold anything: every CLI
// output path prints them escaped.
func TestCLIEscapesStoredText(t *testing.T) {
	ts := startServer(t)
	bad := strings.Join(hostile, "|")
	ts.rules.mu.Lock()
	r, _ := ts.rules.upsert(store.Input{Rule: mustParse(t, ruleDiscard), Reason: bad, Actor: "evil\x1b]0;title\x07", Sites: []string{"s\u202e1"}})
	ts.rules.upsert(store.Input{Rule: mustParse(t, "route 203.0.113.9/32 then blackhole"), Reason: bad})
	ts.rules.record(r.ID, store.EventUpdated, "a\x1b[31mred")
	ts.rules.mu.Unlock()
	id := itoa(r.ID)
	for _, args := range [][]string{
		{"rule", "list"}, {"rule", "list", "--json"}, {"rule", "list", "--order", "id"},
		{"rule", "show", id}, {"rule", "show", "--json", id},
		{"rule", "history", id}, {"rule", "history", "--json", id},
		{"route", "list"}, {"route", "list", "--json"},
	} {
		code, out, errOut := runCLI(t, ts.sock, args...)
		if code != 0 {
			t.Errorf("%q: exit %d, %s", args, code, errOut)
		}
		for _, s := range []string{out, errOut} {
			if c, ok := unsafeRune(s); ok {
				t.Errorf("%q printed the raw character %U:\n%q", args, c, s)
			}
		}
		if !strings.Contains(out, `\x1b`) && !strings.Contains(out, `\u001b`) {
			t.Errorf("%q: the escaped ESC is not shown:\n%s", args, out)
		}
	}
}

// unsafeRune finds a character a terminal could act on (other than the
// newlines and tabs of the output's own layout).
func unsafeRune(s string) (rune, bool) {
	for i, c := range s {
		if c == '\n' || c == '\t' {
			continue
		}
		if c == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return c, true
			}
		}
		if !unicode.IsPrint(c) {
			return c, true
		}
	}
	return 0, false
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func asInputError(err error, target **store.InputError) bool { return errors.As(err, target) }
