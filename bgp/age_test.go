package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// The paths ribkeeper announces carry the time they were announced: the
// stock gobgp CLI on grpc_listen shows their age from then, not from the
// Unix epoch (~20,782 days).
func TestPathAgeIsWhenAnnounced(t *testing.T) {
	start := time.Now().Unix()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t, "127.0.0.1"))
	s := startSpeaker(t, Config{GRPCListen: addr})
	s.SetRouteNextHops(netip.MustParseAddr("192.0.2.2"), netip.Addr{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rules := []flowspec.Rule{
		parseRule(t, "match destination 192.0.2.0/24 protocol ==17 then discard"),
		parseRule(t, "match destination 2001:db8::/32 then discard"),
		parseRule(t, "route 192.0.2.7/32 then blackhole"),
	}
	for i, err := range s.Announce(ctx, rules) {
		if err != nil {
			t.Fatalf("announce %s: %v", rules[i], err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := api.NewGoBgpServiceClient(conn)
	seen := 0
	for _, fam := range []*api.Family{
		{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
		{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
		{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST},
	} {
		// The gRPC server starts with the speaker: the call waits until
		// the connection is ready (bounded by ctx).
		stream, err := gc.ListPath(ctx, &api.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: fam}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("ListPath %v: %v", fam, err)
		}
		for {
			r, err := stream.Recv()
			if err != nil {
				break
			}
			for _, p := range r.Destination.Paths {
				seen++
				if age := p.Age.GetSeconds(); age < start {
					t.Errorf("%v %s: timestamp %s, before the test started (%s)", fam, r.Destination.Prefix, time.Unix(age, 0).UTC(), time.Unix(start, 0).UTC())
				}
			}
		}
	}
	if seen != 3 {
		t.Fatalf("listed %d paths, want 3", seen)
	}
}
