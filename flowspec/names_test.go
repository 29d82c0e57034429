package flowspec

import (
	"slices"
	"testing"
)

func TestUsedActionNames(t *testing.T) {
	for text, want := range map[string][]string{
		"match destination 192.0.2.1/32 then discard":                                         {"discard"},
		"match destination 192.0.2.1/32 then rate-limit 125000 as 100 action sample":          {"rate-limit", "action"},
		"match destination 192.0.2.1/32 then rate-limit-packets 5 redirect 65000:100 mark 10": {"redirect", "mark", "rate-limit-packets"},
		"match destination 192.0.2.1/32 then redirect-ip 192.0.2.9":                           {"redirect-ip"},
		"match destination 192.0.2.1/32 then accept":                                          {"accept"},
		"match destination 192.0.2.1/32 then ext 0x0102030405060708":                          {"ext"},
		"route 192.0.2.1/32 then blackhole":                                                   {"rtbh"},
		"route 192.0.2.1/32 then community 65000:1 next-hop 192.0.2.254":                      {"route"},
		"route 192.0.2.1/32 then blackhole community 65000:1":                                 {"route"},
		"route 192.0.2.1/32 then blackhole next-hop 192.0.2.254":                              {"route"},
		"route 2001:db8::1/128 then blackhole":                                                {"rtbh"},
	} {
		r, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := UsedActionNames(r); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", text, got, want)
		}
		for _, n := range UsedActionNames(r) {
			if _, ok := CanonicalActionName(n); !ok {
				t.Errorf("%s: %q is not an allowed action name", text, n)
			}
		}
	}
	for in, want := range map[string]string{"Discard": "discard", "blackhole": "rtbh", "rtbh": "rtbh", " mark ": "mark", "Route": "route"} {
		if got, ok := CanonicalActionName(in); !ok || got != want {
			t.Errorf("CanonicalActionName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "drop", "sample", "routes"} {
		if _, ok := CanonicalActionName(bad); ok {
			t.Errorf("CanonicalActionName(%q) accepted", bad)
		}
	}
}
