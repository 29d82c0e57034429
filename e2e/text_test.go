package e2e

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	_ "github.com/mattn/go-sqlite3"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// Through the built binary: a reason with control characters is refused
// with one line naming the field, and a row stored before that check (put
// straight into the database here) prints escaped: no raw ESC, NUL or
// bidi override reaches stdout or stderr.
func TestHostileTextNeverPrintedRaw(t *testing.T) {
	a := startAppliance(t, birdtest.Options{}, "", "", false)
	_, errOut, code := a.cli("rule", "add", "--reason", "a\x1b[2Jb", "match destination 203.0.113.7/32 then discard")
	if code != 1 || !strings.Contains(errOut, "reason") || strings.Count(errOut, "\n") != 1 || strings.ContainsRune(errOut, 0x1b) {
		t.Fatalf("rule add with ESC in the reason: exit %d, %q", code, errOut)
	}
	id := a.addRule("--reason", "clean", "match destination 203.0.113.7/32 then discard")

	db, err := sql.Open("sqlite3", "file:"+filepath.Join(a.dir, "rk.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const legacy = "old\x1b]0;pwned\x07\x1b[31m\u202eevil\x00end\x9b"
	if _, err := db.Exec(`UPDATE rules SET reason = ?, actor = ? WHERE id = ?`, legacy, "x\x1b[Hy", id); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"rule", "list"}, {"rule", "list", "--json"}, {"rule", "list", "--order", "id"},
		{"rule", "show", id}, {"rule", "show", "--json", id}, {"rule", "history", id},
	} {
		out, errOut, code := a.cli(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
		for _, s := range []string{out, errOut} {
			if !utf8.ValidString(s) {
				t.Errorf("%q printed bytes that are not UTF-8 (a raw C1 control?):\n%q", args, s)
			}
			for _, c := range s {
				if c != '\n' && c != '\t' && !unicode.IsPrint(c) { // U+FFFD (the API's replacement for a stray byte) is harmless
					t.Errorf("%q printed %U raw:\n%q", args, c, s)
					break
				}
			}
		}
		if !strings.Contains(out, "\\x1b") && !strings.Contains(out, "\\u001b") && args[1] != "history" {
			t.Errorf("%q does not show the escaped ESC:\n%s", args, out)
		}
	}
}
