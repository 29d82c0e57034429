package exabgptest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Messages in the shape ExaBGP 4.2.21's JSON encoder writes them (trimmed
// to the fields Received reads).
var lines = []string{
	`{"type": "state", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "state": "up"}}`,
	`{"type": "update", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "message": {"update": {"attribute": {"origin": "igp", "extended-community": [{"value": 9225060886715039744, "string": "rate-limit:0"}]}, "announce": {"ipv4 flow": {"no-nexthop": [{"destination-ipv4": ["10.0.0.0/24"], "destination-port": [">=1024&<=2048", "=80"], "string": "flow destination-ipv4 10.0.0.0/24 destination-port [ >=1024&<=2048 =80 ]"}]}}}}}}`,
	`{"type": "update", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "message": {"update": {"attribute": {"origin": "igp", "community": [[65535, 666], [65535, 65281]]}, "announce": {"ipv4 unicast": {"192.0.2.99": [{"nlri": "203.0.113.7/32"}]}}}}}}`,
	`{"type": "update", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.9"}, "message": {"update": {"announce": {"ipv4 unicast": {"192.0.2.1": [{"nlri": "198.51.100.0/24"}]}}}}}}`,
	`{"type": "update", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "message": {"update": {"withdraw": {"ipv4 unicast": [{"nlri": "203.0.113.7/32"}]}}}}}`,
	`{"type": "notification", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "notification": {"code": 6, "subcode": 3, "data": "0x"}}}`,
	`{"type": "state", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "state": "down", "reason": "peer reset"}}`,
	`{"type": "state", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "state": "up"}}`,
	`{"type": "update", "neighbor": {"address": {"local": "127.0.0.4", "peer": "127.0.0.1"}, "message": {"update": {"attribute": {"origin": "igp"}, "announce": {"ipv4 unicast": {"192.0.2.99": [{"nlri": "203.0.113.8/32"}]}}}}}}`,
	`{"type": "upda`, // a line still being written
}

func TestReceived(t *testing.T) {
	dir := t.TempDir()
	s := &Speaker{Options: Options{Receive: true}, recv: filepath.Join(dir, "r.jsonl")}
	write := func(n int) {
		if err := os.WriteFile(s.recv, []byte(strings.Join(lines[:n], "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	r, err := s.Received("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	f, ok := r.Flows["flow destination-ipv4 10.0.0.0/24 destination-port [ >=1024&<=2048 =80 ]"]
	if !ok || f.Family != "ipv4 flow" || len(f.ExtCommunities) != 1 || f.ExtCommunities[0].String != "rate-limit:0" ||
		strings.Join(f.Components["destination-port"], " ") != ">=1024&<=2048 =80" {
		t.Fatalf("flow: %+v (%v)", f, ok)
	}
	u := r.Unicast["203.0.113.7/32"]
	if u.NextHop != "192.0.2.99" || len(u.Communities) != 2 || u.Communities[0] != [2]uint32{65535, 666} || !r.Up || r.Ups != 1 {
		t.Fatalf("unicast %+v, up %v ups %d", u, r.Up, r.Ups)
	}

	write(len(lines))
	r, err = s.Received("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// The session went down (its routes with it) and came back with one route.
	if len(r.Flows) != 0 || len(r.Unicast) != 1 || r.Unicast["203.0.113.8/32"].NextHop != "192.0.2.99" {
		t.Errorf("after the reset: flows %v unicast %v", r.Flows, r.Unicast)
	}
	if r.Ups != 2 || r.Downs != 1 || !r.Up || len(r.Reasons) != 1 || r.Reasons[0] != "peer reset" ||
		len(r.Notifications) != 1 || r.Notifications[0] != "6/3" {
		t.Errorf("history: %+v", r)
	}
	if _, ok := r.Unicast["198.51.100.0/24"]; ok {
		t.Error("another peer's route counted")
	}
}
