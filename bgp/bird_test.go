// Go 1.24+ listeners use Multipath TCP by default, and Linux refuses
// TCP_MD5SIG on MPTCP sockets (ENOPROTOOPT); see Neighbor.Password.
//go:debug multipathtcp=0

package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// bird is a real BIRD 2 router peering with the speaker over loopback.
type bird struct {
	dir, sock string
}

func birdBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found but CI is set", name)
			}
			t.Skipf("%s not found", name)
		}
	}
	p, _ := exec.LookPath("bird")
	return p
}

// startBird runs bird on addr:port with one neighbor, the speaker.
func startBird(t *testing.T, addr string, port int32, asn uint32, nAddr string, nPort int32, nASN uint32, password string) *bird {
	t.Helper()
	bin := birdBinary(t)
	b := &bird{dir: t.TempDir()}
	b.sock = filepath.Join(b.dir, "bird.ctl")
	var c strings.Builder
	fmt.Fprintf(&c, "log stderr all;\nrouter id %s;\nprotocol device {}\nflow4 table ft4;\nflow6 table ft6;\n", addr)
	fmt.Fprintf(&c, "protocol bgp up {\n  local %s port %d as %d;\n  neighbor %s port %d as %d;\n", addr, port, asn, nAddr, nPort, nASN)
	c.WriteString("  multihop;\n  connect retry time 1;\n  error wait time 1, 2;\n")
	if password != "" {
		fmt.Fprintf(&c, "  password %q;\n", password)
	}
	c.WriteString("  flow4 { table ft4; import all; export none; };\n  flow6 { table ft6; import all; export none; };\n}\n")
	conf := filepath.Join(b.dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(c.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(b.dir, "bird.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", "-c", conf, "-s", b.sock, "-P", filepath.Join(b.dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(b.dir, "bird.log"))
			t.Logf("bird log:\n%s", out)
		}
	})
	eventually(t, 10*time.Second, "bird control socket", func() bool {
		_, err := b.birdc("show", "status")
		return err == nil
	})
	return b
}

func (b *bird) birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %v: %v: %s", args, err, out)
	}
	return string(out), nil
}

func (b *bird) established() bool {
	out, err := b.birdc("show", "protocols", "up")
	return err == nil && strings.Contains(out, "Established")
}

func (b *bird) routes(t *testing.T, table string) string {
	t.Helper()
	out, err := b.birdc("show", "route", "table", table, "all")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

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
	eventually(t, 30*time.Second, "BIRD session established", b.established)

	r4 := flowspec.Rule{Match: match4(t, 7), Action: flowspec.Discard()}
	r6 := flowspec.Rule{Match: match6(t, 7), Action: flowspec.RateLimit(125000)}
	for _, r := range []flowspec.Rule{r4, r6} {
		if err := s.Announce(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var ft4, ft6 string
	eventually(t, 10*time.Second, "BIRD has both rules", func() bool {
		ft4, ft6 = b.routes(t, "ft4"), b.routes(t, "ft6")
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

	if err := s.Withdraw(ctx, r4.Match); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "BIRD lost the ipv4 rule", func() bool {
		return !strings.Contains(b.routes(t, "ft4"), "10.0.0.7/32")
	})
}

func TestBird(t *testing.T) { testBird(t, "") }

// TestBirdMD5: the session only comes up if both sides sign with TCP MD5,
// which proves the key took effect on our side.
func TestBirdMD5(t *testing.T) { testBird(t, "s3cret-key") }
