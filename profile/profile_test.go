package profile

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

func rule(t *testing.T, s string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return r
}

// TestCheck is each profile's table against rules written by hand: "" is
// taken, otherwise a word the reason must contain.
func TestCheck(t *testing.T) {
	cases := []struct {
		rule string
		want map[string]string // profile → "" or part of the reason
	}{
		{"match destination 192.0.2.0/24 destination-port ==80 protocol ==6 then discard",
			map[string]string{"generic": "", "frr": "", "bird": "", "exabgp": "", "junos": "", "iosxr": "", "eos": ""}},
		{"match destination 192.0.2.0/24 port !=80 then discard",
			map[string]string{"generic": "", "frr": "!=", "bird": "", "exabgp": "", "iosxr": ""}},
		{"match destination 192.0.2.0/24 port true then discard",
			map[string]string{"generic": "", "frr": "true (111)", "bird": ""}},
		{"match destination 192.0.2.0/24 port false then discard",
			map[string]string{"frr": ""}},
		{"match destination 192.0.2.0/24 port ==1 ==2 ==3 ==4 ==5 then discard",
			map[string]string{"frr": ""}},
		{"match destination 192.0.2.0/24 port ==1 ==2 ==3 ==4 ==5 ==6 then discard",
			map[string]string{"frr": "more than 5 items in one component (port has 6)", "bird": "", "iosxr": ""}},
		// bitmask "not all" sets the same bit as numeric gt: not a !=.
		{"match destination 192.0.2.0/24 tcp-flags !=S then discard",
			map[string]string{"frr": ""}},
		{"match destination 192.0.2.0/24 then redirect 4200000000:7",
			map[string]string{"exabgp": "4-byte AS", "frr": "", "bird": "", "eos": ""}},
		{"match destination 192.0.2.0/24 then redirect-ip 192.0.2.1",
			map[string]string{"junos": "", "iosxr": "draft -00", "eos": "redirect-to-IP", "frr": ""}},
		{"match destination 2001:db8::/32 then redirect-ip 2001:db8::1",
			map[string]string{"junos": "IPv6 redirect-to-IP", "frr": "IPv6 redirect-to-IP", "bird": "", "iosxr": "IPv6"}},
		{"match destination 192.0.2.0/24 then rate-limit-packets 500",
			map[string]string{"frr": "traffic-rate-packets", "eos": "traffic-rate-packets", "bird": "", "generic": ""}},
		{"match destination 192.0.2.0/24 protocol ==6 ==17 port ==1 ==2 destination-port ==1 ==2 source-port ==1 ==2 packet-length ==1 ==2 then discard",
			map[string]string{"iosxr": "", "frr": ""}},
		{"match destination 192.0.2.0/24 protocol ==6 ==17 port ==1 ==2 destination-port ==1 ==2 source-port ==1 ==2 packet-length ==1 ==2 dscp ==1 ==2 then discard",
			map[string]string{"iosxr": "5 multi-value ranges per rule (this rule has 6)", "frr": ""}},
	}
	for _, c := range cases {
		r := rule(t, c.rule)
		for name, want := range c.want {
			p, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Check(r)
			switch {
			case want == "" && got != nil:
				t.Errorf("%s: %q refused: %v", name, c.rule, got)
			case want != "" && got == nil:
				t.Errorf("%s: %q taken, want refused for %q", name, c.rule, want)
			case want != "" && !strings.Contains(got.Error(), want):
				t.Errorf("%s: %q: reason %q lacks %q", name, c.rule, got.Error(), want)
			case got != nil && !strings.HasPrefix(got.Error(), name+" "):
				t.Errorf("%s: reason %q does not start with the profile name", name, got.Error())
			}
		}
	}
}

func TestRoutesAlwaysPass(t *testing.T) {
	m, err := flowspec.ParseMatch(flowspec.IPv4Unicast, "192.0.2.1/32")
	if err != nil {
		t.Skip("route text form differs:", err)
	}
	for _, p := range All() {
		if r := p.Check(flowspec.Rule{Match: m, Action: flowspec.Blackhole()}); r != nil {
			t.Errorf("%s refused a route: %v", p.Name, r)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, n := range []string{"junos", "iosxr", "eos", "frr", "bird", "exabgp", "generic"} {
		p, err := Lookup(n)
		if err != nil || p.Name != n {
			t.Errorf("Lookup(%q) = %v, %v", n, p, err)
		}
	}
	if p, err := Lookup(""); err != nil || p.Name != Generic || p.Restrictive() {
		t.Errorf("Lookup(\"\") = %v, %v; want the permissive generic", p, err)
	}
	_, err := Lookup("cisco")
	if err == nil || !strings.Contains(err.Error(), "iosxr") {
		t.Errorf("unknown profile error %v does not list the names", err)
	}
	if !slices.IsSorted(Names()) || len(Names()) != len(builtin) {
		t.Errorf("Names() = %v", Names())
	}
	if p, _ := Lookup("iosxr"); p.MaxRules != 3000 {
		t.Errorf("iosxr cap %d, want 3000", p.MaxRules)
	}
}

// TestCap checks the kept set against its definition (the first Max of the
// added rules in precedence order) after every step of random adds and
// removes, and that the changes Add and Remove report are exactly the
// rules whose kept state flipped.
func TestCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pool []flowspec.Match
	for i := range 60 {
		s := "match destination 10.0." + itoa(i%7) + ".0/" + itoa(24+i%5) + " destination-port ==" + itoa(i)
		m, err := flowspec.ParseMatch(flowspec.IPv4, strings.TrimPrefix(s, "match "))
		if err != nil {
			t.Fatal(err)
		}
		pool = append(pool, m)
	}
	for _, max := range []int{1, 3, 10, 100} {
		c := NewCap(max)
		live := map[flowspec.Match]bool{}
		kept := func() map[flowspec.Match]bool {
			var ms []flowspec.Match
			for m := range live {
				ms = append(ms, m)
			}
			flowspec.Sort(ms)
			out := map[flowspec.Match]bool{}
			for i, m := range ms {
				if i < max {
					out[m] = true
				}
			}
			return out
		}
		before := kept()
		for step := range 2000 {
			m := pool[rng.IntN(len(pool))]
			var changed []flowspec.Match
			if live[m] {
				delete(live, m)
				changed = c.Remove(m)
			} else {
				live[m] = true
				changed = c.Add(m)
			}
			after := kept()
			var want []flowspec.Match
			for _, p := range pool {
				if p != m && before[p] != after[p] {
					want = append(want, p)
				}
			}
			if len(want) != len(changed) || (len(want) == 1 && want[0] != changed[0]) {
				t.Fatalf("max %d step %d: reported %v, want %v", max, step, changed, want)
			}
			for _, p := range pool {
				if c.Kept(p) != after[p] || c.Has(p) != live[p] {
					t.Fatalf("max %d step %d: %s kept %v has %v, want %v %v", max, step, p, c.Kept(p), c.Has(p), after[p], live[p])
				}
			}
			if c.Len() != len(live) {
				t.Fatalf("Len %d, want %d", c.Len(), len(live))
			}
			before = after
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
