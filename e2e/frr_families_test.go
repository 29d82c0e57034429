package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/frrtest"
)

// Under the frr profile, on both FlowSpec families, what ribkeeper
// reports delivered to FRR 8.4 is exactly what FRR holds: a rule with
// rate-limit-packets (0x800c, which FRR takes but cannot read, IPv4 and
// IPv6 alike; see the receiver matrix) is held back and reported "not
// sent", the others arrive and are reported 1/1.
func TestFRRProfileBothFamilies(t *testing.T) {
	frrtest.Binary(t)
	const rk, frrAddr = "127.0.0.26", "127.0.0.36"
	rkPort := birdtest.FreePort(t, rk)
	fr := frrtest.Start(t, frrtest.Options{Address: frrAddr, ASN: 65004,
		Peers: []frrtest.Peer{{Address: rk, Port: rkPort, ASN: 65000}}})
	d := startProfileSpeaker(t, rk, rkPort, []profileNeighbor{{frrAddr, 65004, fr.Port, "frr"}})
	b, err := os.ReadFile(d.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.ReplaceAll(string(b), `families = ["ipv4-flowspec"]`, `families = ["ipv4-flowspec", "ipv6-flowspec"]`)
	if err := os.WriteFile(d.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	d.stop()
	d.start()
	waitFor(t, 60*time.Second, "FRR session established", func() bool { return fr.Established(rk) })

	type rule struct {
		text, dst string // dst: as FRR prints the destination
		why       string // why not sent; "" for a rule FRR gets
	}
	const packets = "not sent to " + frrAddr + ": frr does not know traffic-rate-packets (0x800c)"
	rules := []rule{
		{"match destination 10.40.1.0/24 then rate-limit-packets 500", "10.40.1.0/24", packets},
		{"match destination 10.40.2.0/24 then rate-limit 1000", "10.40.2.0/24", ""},
		{"match destination 10.40.3.0/24 then discard", "10.40.3.0/24", ""},
		{"match destination 2001:db8:1::/48 then rate-limit-packets 500", "2001:db8:1::/48/off 0", packets},
		{"match destination 2001:db8:2::/48 then rate-limit 1000", "2001:db8:2::/48/off 0", ""},
		{"match destination 2001:db8:3::/48 protocol ==17 then discard", "2001:db8:3::/48/off 0", ""},
	}
	ids := make([]string, len(rules))
	var want []string
	for i, r := range rules {
		ids[i] = d.addRule("--ttl", "1h", r.text)
		if r.why == "" {
			want = append(want, r.dst)
		}
	}
	slices.Sort(want)
	held := func() []string {
		var out []string
		for _, afi := range []string{"ipv4", "ipv6"} {
			flows, err := fr.Flows(afi)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range flows {
				for _, l := range f.Match {
					if dst, ok := strings.CutPrefix(l, "Destination Address "); ok {
						out = append(out, dst)
					}
				}
			}
		}
		slices.Sort(out)
		return out
	}
	var got []string
	waitFor(t, 30*time.Second, fmt.Sprintf("FRR holds %v", want), func() bool { got = held(); return slices.Equal(got, want) })
	for i, r := range rules {
		var m map[string]any
		waitFor(t, 30*time.Second, "rule "+ids[i]+"'s delivery settled", func() bool {
			m = d.show(ids[i])
			return m["announced"] == true
		})
		notSent := fmt.Sprint(m["not_sent"])
		switch {
		case r.why == "" && (m["announced_to"] != "1/1" || notSent != "<nil>"):
			t.Errorf("%s: announced to %v, not sent %v; FRR holds it, want 1/1", r.text, m["announced_to"], notSent)
		case r.why != "" && (m["announced_to"] != "0/1" || notSent != "["+r.why+"]"):
			t.Errorf("%s: announced to %v, not sent %v; FRR does not get it, want 0/1 and %q", r.text, m["announced_to"], notSent, r.why)
		}
	}
	if s, err := fr.Neighbor(rk); err != nil || s.Dropped != 0 {
		t.Errorf("FRR session: %+v %v", s, err)
	}
}
