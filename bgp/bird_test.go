// Go 1.24+ listeners use Multipath TCP by default, and Linux refuses
// TCP_MD5SIG on MPTCP sockets (ENOPROTOOPT); see Neighbor.Password.
//go:debug multipathtcp=0

package bgp

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// startBird runs a real BIRD 2 on addr:port (e2e/birdtest) with one
// neighbor, the speaker; its BGP protocol is "up0".
func startBird(t *testing.T, addr string, port int32, asn uint32, nAddr string, nPort int32, nASN uint32, password string) *birdtest.Router {
	t.Helper()
	return birdtest.Start(t, birdtest.Options{
		Address: addr, Port: int(port), ASN: asn, Password: password,
		Peers: []birdtest.Peer{{Address: nAddr, Port: int(nPort), ASN: nASN}},
	})
}

// birdRoutes is BIRD's text of table.
func birdRoutes(t *testing.T, b *birdtest.Router, table string) string {
	t.Helper()
	out, err := b.Birdc("show", "route", "table", table, "all")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func birdUp(b *birdtest.Router) func() bool { return func() bool { return b.Established(0) } }

func testBird(t *testing.T, password string) {
	const ourAddr, birdAddr = "127.0.0.1", "127.0.0.3"
	ourPort, birdPort := freePort(t, ourAddr), freePort(t, birdAddr)
	b := startBird(t, birdAddr, birdPort, 65001, ourAddr, ourPort, 65000, password)
	s := New(testLogger(t), Config{
		ASN:             65000,
		RouterID:        netip.MustParseAddr("192.0.2.1"),
		ListenAddresses: []string{ourAddr},
		ListenPort:      ourPort,
		Neighbors: []Neighbor{{
			Address:      netip.MustParseAddr(birdAddr),
			ASN:          65001,
			Port:         uint16(birdPort),
			LocalAddress: netip.MustParseAddr(ourAddr),
			Families:     []flowspec.Family{flowspec.IPv4, flowspec.IPv6},
			Password:     password,
		}},
	})
	if err := s.Start(context.Background()); err != nil {
		if password != "" && strings.Contains(err.Error(), "TCP MD5") {
			// The verification did its job: GoBGP only logged this.
			t.Skipf("this kernel cannot do TCP MD5; Start refused as it should: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ctx := context.Background()
	eventually(t, 30*time.Second, "BIRD session established", birdUp(b))

	r4 := flowspec.Rule{Match: match4(t, 7), Action: flowspec.Discard()}
	r6 := flowspec.Rule{Match: match6(t, 7), Action: flowspec.RateLimit(125000)}
	for _, r := range []flowspec.Rule{r4, r6} {
		if err := announceOne(s, ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var ft4, ft6 string
	eventually(t, 10*time.Second, "BIRD has both rules", func() bool {
		ft4, ft6 = birdRoutes(t, b, "ft4"), birdRoutes(t, b, "ft6")
		return strings.Contains(ft4, "dst 10.0.0.7/32") && strings.Contains(ft6, "dst 2001:db8::7/128")
	})
	t.Logf("ft4:\n%s\nft6:\n%s", ft4, ft6)
	// traffic-rate 0 (discard) is (generic, 0x80060000, 0x0); 125000 bytes/s
	// is 0x47f42400 as float32.
	if !strings.Contains(ft4, "(generic, 0x80060000, 0x0)") {
		t.Errorf("ft4 lacks the discard community")
	}
	if !strings.Contains(ft6, "(generic, 0x80060000, 0x47f42400)") {
		t.Errorf("ft6 lacks the rate-limit community")
	}

	if err := withdrawOne(s, ctx, r4.Match); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "BIRD lost the ipv4 rule", func() bool {
		return !strings.Contains(birdRoutes(t, b, "ft4"), "10.0.0.7/32")
	})
}

func TestBird(t *testing.T) { testBird(t, "") }

// TestBirdMD5: the session only comes up if both sides sign with TCP MD5,
// which proves the key took effect on our side.
func TestBirdMD5(t *testing.T) { testBird(t, "s3cret-key") }
