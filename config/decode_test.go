package config

import (
	"errors"
	"strings"
	"testing"
)

// A value of the wrong type, or a table where a list of tables belongs
// (and the reverse), is reported with its key and line in words that say
// what to write instead.
func TestDecodeErrors(t *testing.T) {
	nb := minimal + "[[neighbor]]\naddress = \"127.0.0.2\"\n" // neighbor keys start at line 7
	for _, c := range []struct {
		name, text, want string // want: the whole error line
	}{
		{"string for a number", nb + "asn = \"65001\"\n",
			`f.toml:7: neighbor[1].asn: a number is expected, e.g. asn = 65001; got the string "65001"`},
		{"word for a number", "[bgp]\nasn = \"sixty\"\nrouter_id = \"192.0.2.1\"\n",
			`f.toml:2: bgp.asn: a number is expected (digits, without quotes); got the string "sixty"`},
		{"string for an optional number", minimal + "listen_port = \"1790\"\n",
			`f.toml:5: bgp.listen_port: a number is expected, e.g. listen_port = 1790; got the string "1790"`},
		{"fraction for a number", nb + "port = 179.0\n",
			`f.toml:7: neighbor[1].port: a whole number is expected, e.g. port = 179; got the number 179`},
		{"number for a string", "[bgp]\nasn = 65000\nrouter_id = 1\n",
			`f.toml:3: bgp.router_id: a string in quotes is expected, e.g. router_id = "1"; got the number 1`},
		{"date for a string", "site = 2026-01-02\n" + minimal,
			`f.toml:1: site: a string in quotes is expected; got a date/time`},
		{"string for a boolean", nb + "asn = 1\npassive = \"yes\"\n",
			`f.toml:8: neighbor[1].passive: true or false is expected, e.g. passive = true (without quotes); got the string "yes"`},
		{"string for a list", nb + "asn = 1\nfamilies = \"ipv4-flowspec\"\n",
			`f.toml:8: neighbor[1].families: a list in square brackets is expected, e.g. families = ["ipv4-flowspec"]; got the string "ipv4-flowspec"`},
		{"wrong entry in a list", nb + "asn = 1\nfamilies = [\"ipv4-flowspec\", 4]\n",
			`f.toml:8: neighbor[1].families: entry 2: a string in quotes is expected, e.g. "4"; got the number 4`},
		{"table for a list of tables", minimal + "[neighbor]\naddress = \"127.0.0.2\"\nasn = 1\n",
			`f.toml:5: neighbor: [neighbor] (single brackets) is one table, but neighbor entries are a list: write [[neighbor]] (double brackets) before each one`},
		{"nested table for a list of tables", minimal + "[api]\nlisten = \"127.0.0.1:1\"\n[api.token]\nname = \"x\"\n",
			`f.toml:7: api.token: [api.token] (single brackets) is one table, but api.token entries are a list: write [[api.token]] (double brackets) before each one`},
		{"list of tables for a table", "[[bgp]]\nasn = 65000\nrouter_id = \"192.0.2.1\"\n",
			`f.toml:1: bgp: [[bgp]] (double brackets) makes a list of tables, but there is only one bgp section: write [bgp]`},
		{"two tables for a table", minimal + "[[store]]\npath = \"a\"\n[[store]]\npath = \"b\"\n",
			`f.toml:5: store: [[store]] (double brackets) is written 2 times, but there is only one store section: write [store] once, with single brackets`},
		{"value for a table", "bgp = 1\n",
			`f.toml:1: bgp: a table is expected: write its keys under a [bgp] line; got the number 1`},
		{"value for a list of tables", "neighbor = \"127.0.0.2\"\n" + minimal,
			`f.toml:1: neighbor: a list of tables is expected: write each entry as a [[neighbor]] line followed by its keys; got the string "127.0.0.2"`},
		{"wrong case", "[bgp]\nASN = 65000\nrouter_id = \"192.0.2.1\"\n",
			`f.toml:2: bgp.ASN: unknown key; keys are case-sensitive: write asn`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.toml", []byte(c.text))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v, want Errors", err)
			}
			for _, e := range es {
				if e.Error() == c.want {
					return
				}
			}
			t.Errorf("errors:\n%v\nlack:\n%s", err, c.want)
		})
	}
}

// One wrong type does not hide the rest of the file: every problem comes
// out, in file order, each once (a refused value is not also "missing").
func TestDecodeErrorsReportsEveryProblem(t *testing.T) {
	text := `site = "lab"
[bgp]
asn = "65000"
router_id = "192.0.2.300"
listen_prot = 1790
[neighbor]
address = "127.0.0.2"
asn = "65001"
port = 70000
[store]
driver = "mysql"
`
	_, err := Parse("f.toml", []byte(text))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v, want Errors", err)
	}
	want := []string{
		`f.toml:3: bgp.asn: a number is expected, e.g. asn = 65000; got the string "65000"`,
		`f.toml:4: bgp.router_id: "192.0.2.300" is not an IPv4 address`,
		`f.toml:5: bgp.listen_prot: unknown key`,
		`f.toml:6: neighbor: [neighbor] (single brackets) is one table`,
		`f.toml:8: neighbor[1].asn: a number is expected, e.g. asn = 65001; got the string "65001"`,
		`f.toml:9: neighbor[1].port: 70000 is not a TCP port`,
		`f.toml:11: store.driver: "mysql" is not a store driver`,
	}
	if len(es) != len(want) {
		t.Errorf("%d errors, want %d:\n%v", len(es), len(want), err)
	}
	for i, w := range want {
		if i >= len(es) || !strings.HasPrefix(es[i].Error(), w) {
			t.Errorf("error %d: want prefix %q\nall:\n%v", i+1, w, err)
		}
	}
}
