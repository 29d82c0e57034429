package flowspec

import (
	"slices"
	"testing"
)

func mustMatch(t testing.TB, f Family, s string) Match {
	t.Helper()
	m, err := ParseMatch(f, s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompare(t *testing.T) {
	// Each list is in strict precedence order (first applies first).
	orders := []struct {
		f     Family
		rules []string
	}{
		{IPv4, []string{
			"destination 10.1.0.0/16",             // more specific than /8
			"destination 10.0.0.0/8 protocol ==6", // same prefix, more components
			"destination 10.0.0.0/8",
			"destination 11.0.0.0/8", // higher address
			"source 10.0.0.0/8",      // no destination: type 2 first
			"protocol ==6 ==17",      // 01 06 ... < 81 06
			"protocol ==6",
			"protocol ==17",
			"port ==80",
		}},
		{IPv6, []string{
			"destination 2001:db8::/32",
			"destination ::1:0:0/96 offset 64", // higher offset loses
			"source 2001:db8::/32",
		}},
	}
	for _, o := range orders {
		var ms []Match
		for _, s := range o.rules {
			ms = append(ms, mustMatch(t, o.f, s))
		}
		for i := range ms {
			for j := range ms {
				want := cmpInt(i, j)
				if got := Compare(ms[i], ms[j]); got != want {
					t.Errorf("Compare(%q, %q) = %d, want %d", ms[i], ms[j], got, want)
				}
			}
		}
		shuffled := slices.Clone(ms)
		slices.Reverse(shuffled)
		Sort(shuffled)
		if !slices.Equal(shuffled, ms) {
			t.Errorf("Sort = %v", shuffled)
		}
	}
	if Compare(mustMatch(t, IPv4, "port ==1"), mustMatch(t, IPv6, "port ==1")) != -1 {
		t.Error("IPv4 must sort before IPv6")
	}
	if Compare(Match{}, mustMatch(t, IPv4, "port ==1")) != 1 {
		t.Error("invalid must sort last")
	}
}

func TestShadows(t *testing.T) {
	tests := []struct {
		b, a string
		want bool
	}{
		{"match protocol ==6 ==17 then discard", "match protocol ==6 then rate-limit 10", true},
		{"match protocol ==6 then discard", "match protocol ==6 ==17 then discard", false},
		{"match destination 10.0.0.0/8 source 0.0.0.0/0 then discard", "match destination 10.0.0.0/8 protocol ==6 then discard", true},
		{"match destination 10.0.0.0/8 source 10.0.0.0/8 then discard", "match destination 10.0.0.0/8 protocol ==6 then discard", false},
		// a more specific prefix takes precedence: nothing shadowed.
		{"match destination 10.0.0.0/8 then discard", "match destination 10.1.0.0/16 then discard", false},
		// terminal bit set: evaluation continues.
		{"match protocol ==6 ==17 then action terminal", "match protocol ==6 then discard", false},
		{"match destination-port <1024 >=1024 then discard", "match destination-port ==80 then discard", true},
		{"match destination-port <1024 >1024 then discard", "match destination-port >=80&<=2000 then discard", false},
		{"match tcp-flags S A then discard", "match tcp-flags =SA then discard", true},
		{"match tcp-flags =SA S then discard", "match tcp-flags A then discard", false},
		// b restricts a field a leaves open: b cannot cover a.
		{"match destination 10.1.0.0/16 protocol ==17 then discard", "match destination 10.1.0.0/16 then rate-limit 1000", false},
		{"match destination 10.1.0.0/16 protocol ==17 destination-port ==53 then discard", "match destination 10.1.0.0/16 protocol ==17 then discard", false},
		// ... unless that restriction is true for every value.
		{"match destination 10.0.0.0/8 destination-port >=0 then discard", "match destination 10.0.0.0/8 packet-length ==100 then discard", true},
	}
	for _, tt := range tests {
		b, err1 := Parse(tt.b)
		a, err2 := Parse(tt.a)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := b.Shadows(a); got != tt.want {
			t.Errorf("(%s).Shadows(%s) = %v, want %v (Compare %d)", tt.b, tt.a, got, tt.want, Compare(b.Match, a.Match))
		}
	}
}
