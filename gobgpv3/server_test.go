package gobgpv3

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	apipb "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/signals"
)

// sink records the signals it is given; refuse, if set, is its answer.
type sink struct {
	mu      sync.Mutex
	got     []signals.Signal
	refuse  error
	block   chan struct{} // if set, Accept waits for it (or ctx)
	arrived chan struct{} // if set, receives once per Accept
}

func (k *sink) Accept(ctx context.Context, s signals.Signal) error {
	if k.arrived != nil {
		k.arrived <- struct{}{}
	}
	if k.block != nil {
		select {
		case <-k.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refuse != nil {
		return k.refuse
	}
	k.got = append(k.got, s)
	return nil
}

func (k *sink) signals() []signals.Signal {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]signals.Signal(nil), k.got...)
}

type panicky struct{}

func (panicky) Accept(context.Context, signals.Signal) error { panic("a bug") }

var epoch = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// serve starts a Server for source "fnm" on a loopback port and returns
// its address.
func serve(t *testing.T, cfg Config) string {
	t.Helper()
	if cfg.Source == "" {
		cfg.Source = "fnm"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewFake(epoch)
	}
	lns, err := Listen(cfg.Source, []string{"127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cfg).Serve(ctx, lns...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lns[0].Addr().String()
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fnmPath is the path FastNetMon 1.2.4 adds on a ban (gobgp_next_hop
// 192.0.2.254, gobgp_community_host 65535:666).
func fnmPath(t testing.TB, host string, withdraw bool) *apipb.Path {
	return &apipb.Path{
		Family: &apipb.Family{Afi: apipb.Family_AFI_IP, Safi: apipb.Family_SAFI_UNICAST},
		Nlri:   mustAny(t, &apipb.IPAddressPrefix{Prefix: host, PrefixLen: 32}),
		Pattrs: []*anypb.Any{
			mustAny(t, &apipb.OriginAttribute{Origin: 0}),
			mustAny(t, &apipb.NextHopAttribute{NextHop: "192.0.2.254"}),
			mustAny(t, &apipb.CommunitiesAttribute{Communities: []uint32{65535<<16 | 666}}),
		},
		IsWithdraw: withdraw,
	}
}

func ctx5s(t *testing.T) context.Context {
	// FastNetMon's deadline for each call.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A ban is a start signal from the configured source, the unban its end;
// the attributes are in Detail.
func TestBanUnban(t *testing.T) {
	k := &sink{}
	c := apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: k})))

	if _, err := c.AddPath(ctx5s(t), &apipb.AddPathRequest{TableType: apipb.TableType_GLOBAL, Path: fnmPath(t, "10.10.10.10", false)}); err != nil {
		t.Fatalf("ban: %v", err)
	}
	if _, err := c.AddPath(ctx5s(t), &apipb.AddPathRequest{TableType: apipb.TableType_GLOBAL, Path: fnmPath(t, "10.10.10.10", true)}); err != nil {
		t.Fatalf("unban: %v", err)
	}
	got := k.signals()
	if len(got) != 2 {
		t.Fatalf("sink got %d signals, want 2: %+v", len(got), got)
	}
	want := netip.MustParsePrefix("10.10.10.10/32")
	for i, st := range []signals.State{signals.Start, signals.End} {
		s := got[i]
		if s.Source != "fnm" || s.Target != want || s.State != st || !s.At.Equal(epoch) {
			t.Errorf("signal %d = %+v, want source fnm, target %s, state %s, at %v", i, s, want, st, epoch)
		}
		for _, w := range []string{"AddPath", "origin igp", "next-hop 192.0.2.254", "communities 65535:666"} {
			if !strings.Contains(s.Detail, w) {
				t.Errorf("signal %d detail %q lacks %q", i, s.Detail, w)
			}
		}
	}
}

// IPv6 (next hop in MP_REACH, no family given) and DeletePath with a path.
func TestIPv6AndDeletePath(t *testing.T) {
	k := &sink{}
	c := apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: k})))
	p := &apipb.Path{
		Nlri: mustAny(t, &apipb.IPAddressPrefix{Prefix: "2001:db8::77", PrefixLen: 128}),
		Pattrs: []*anypb.Any{
			mustAny(t, &apipb.MpReachNLRIAttribute{
				Family:   &apipb.Family{Afi: apipb.Family_AFI_IP6, Safi: apipb.Family_SAFI_UNICAST},
				NextHops: []string{"2001:db8::1"},
			}),
			mustAny(t, &apipb.LargeCommunitiesAttribute{Communities: []*apipb.LargeCommunity{{GlobalAdmin: 64500, LocalData1: 1, LocalData2: 666}}}),
			mustAny(t, &apipb.AsPathAttribute{}),
		},
	}
	if _, err := c.AddPath(ctx5s(t), &apipb.AddPathRequest{Path: p}); err != nil {
		t.Fatalf("AddPath: %v", err)
	}
	if _, err := c.DeletePath(ctx5s(t), &apipb.DeletePathRequest{Path: p}); err != nil {
		t.Fatalf("DeletePath: %v", err)
	}
	got := k.signals()
	if len(got) != 2 || got[0].State != signals.Start || got[1].State != signals.End || got[1].Target != netip.MustParsePrefix("2001:db8::77/128") {
		t.Fatalf("signals = %+v, want start and end of 2001:db8::77/128", got)
	}
	for _, w := range []string{"next-hop 2001:db8::1", "64500:1:666", "other attributes AsPathAttribute", "DeletePath"} {
		if !strings.Contains(got[0].Detail+got[1].Detail, w) {
			t.Errorf("details %q / %q lack %q", got[0].Detail, got[1].Detail, w)
		}
	}
	// DeletePath without a path: there is no uuid table to look it up in.
	_, err := c.DeletePath(ctx5s(t), &apipb.DeletePathRequest{Uuid: []byte("0123456789abcdef")})
	wantCode(t, err, codes.InvalidArgument, "no path")
}

func wantCode(t *testing.T, err error, code codes.Code, words ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Errorf("error %v, want code %s", err, code)
		return
	}
	for _, w := range words {
		if !strings.Contains(st.Message(), w) {
			t.Errorf("message %q lacks %q", st.Message(), w)
		}
	}
}

// Anything that is not a unicast prefix in the global table, or a
// malformed attribute, is refused naming the problem, and nothing reaches
// the sink.
func TestRefused(t *testing.T) {
	k := &sink{}
	c := apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: k})))
	cases := []struct {
		name  string
		spoil func(*apipb.AddPathRequest)
		words string
	}{
		{"no path", func(r *apipb.AddPathRequest) { r.Path = nil }, "no path"},
		{"no nlri", func(r *apipb.AddPathRequest) { r.Path.Nlri = nil }, "without nlri"},
		{"vrf", func(r *apipb.AddPathRequest) { r.TableType = apipb.TableType_VRF; r.VrfId = "red" }, "GLOBAL"},
		{"flowspec nlri", func(r *apipb.AddPathRequest) { r.Path.Nlri = mustAny(t, &apipb.FlowSpecNLRI{}) }, "FlowSpecNLRI"},
		{"malformed nlri", func(r *apipb.AddPathRequest) {
			r.Path.Nlri = &anypb.Any{TypeUrl: urlPrefix, Value: []byte{0x12, 0x7f}}
		}, "malformed"},
		{"not an address", func(r *apipb.AddPathRequest) {
			r.Path.Nlri = mustAny(t, &apipb.IPAddressPrefix{Prefix: "10.10.10", PrefixLen: 32})
		}, "not an IP address"},
		{"zone", func(r *apipb.AddPathRequest) {
			r.Path.Nlri = mustAny(t, &apipb.IPAddressPrefix{Prefix: "fe80::1%eth0", PrefixLen: 128})
		}, "not an IP address"},
		{"length", func(r *apipb.AddPathRequest) {
			r.Path.Nlri = mustAny(t, &apipb.IPAddressPrefix{Prefix: "10.10.10.10", PrefixLen: 33})
		}, "prefix_len 33"},
		{"host bits", func(r *apipb.AddPathRequest) {
			r.Path.Nlri = mustAny(t, &apipb.IPAddressPrefix{Prefix: "10.10.10.10", PrefixLen: 24})
		}, "send 10.10.10.0/24"},
		{"family", func(r *apipb.AddPathRequest) { r.Path.Family.Safi = apipb.Family_SAFI_FLOW_SPEC_UNICAST }, "SAFI_UNICAST"},
		{"family mismatch", func(r *apipb.AddPathRequest) { r.Path.Family.Afi = apipb.Family_AFI_IP6 }, "AFI_IP"},
		{"bad origin", func(r *apipb.AddPathRequest) { r.Path.Pattrs[0] = mustAny(t, &apipb.OriginAttribute{Origin: 7}) }, "attribute 1 (apipb.OriginAttribute): origin 7"},
		{"bad next hop", func(r *apipb.AddPathRequest) { r.Path.Pattrs[1] = mustAny(t, &apipb.NextHopAttribute{NextHop: "x"}) }, "next_hop"},
		{"malformed attribute", func(r *apipb.AddPathRequest) {
			r.Path.Pattrs[2] = &anypb.Any{TypeUrl: urlCommunities, Value: []byte{0xff}}
		}, "malformed apipb.CommunitiesAttribute"},
		{"foreign attribute", func(r *apipb.AddPathRequest) { r.Path.Pattrs[2] = mustAny(t, &emptypb.Empty{}) }, "not a GoBGP v3 attribute"},
		{"hostile type url", func(r *apipb.AddPathRequest) {
			r.Path.Pattrs[2] = &anypb.Any{TypeUrl: "type.googleapis.com/apipb.\x1b[31m", Value: nil}
		}, "attribute 3 (?): not a GoBGP v3 attribute"},
		{"too many attributes", func(r *apipb.AddPathRequest) {
			for len(r.Path.Pattrs) <= MaxAttributes {
				r.Path.Pattrs = append(r.Path.Pattrs, r.Path.Pattrs[0])
			}
		}, "more than the 64"},
	}
	for _, tc := range cases {
		req := &apipb.AddPathRequest{TableType: apipb.TableType_GLOBAL, Path: fnmPath(t, "10.10.10.10", false)}
		tc.spoil(req)
		_, err := c.AddPath(ctx5s(t), req)
		t.Run(tc.name, func(t *testing.T) { wantCode(t, err, codes.InvalidArgument, tc.words) })
	}
	if got := k.signals(); len(got) != 0 {
		t.Errorf("refused calls reached the sink: %+v", got)
	}
}

// Every other method, and every other service, answers Unimplemented
// saying what is served.
func TestNotServed(t *testing.T) {
	k := &sink{}
	cc := dial(t, serve(t, Config{Sink: k}))
	c := apipb.NewGobgpApiClient(cc)
	_, err := c.GetBgp(ctx5s(t), &apipb.GetBgpRequest{})
	wantCode(t, err, codes.Unimplemented, "serves only AddPath and DeletePath", "GetBgp")
	_, err = c.StartBgp(ctx5s(t), &apipb.StartBgpRequest{Global: &apipb.Global{Asn: 65000}})
	wantCode(t, err, codes.Unimplemented, "StartBgp")
	lp, err := c.ListPath(ctx5s(t), &apipb.ListPathRequest{})
	if err == nil {
		_, err = lp.Recv()
	}
	wantCode(t, err, codes.Unimplemented, "serves only AddPath and DeletePath", "ListPath")
	as, err := c.AddPathStream(ctx5s(t))
	if err == nil {
		_, err = as.CloseAndRecv()
	}
	wantCode(t, err, codes.Unimplemented, "AddPathStream")
	err = cc.Invoke(ctx5s(t), "/api.GoBgpService/GetBgp", &emptypb.Empty{}, &emptypb.Empty{})
	wantCode(t, err, codes.Unimplemented, "GoBGP v4", "[bgp] grpc_listen")
	err = cc.Invoke(ctx5s(t), "/grpc.health.v1.Health/Check", &emptypb.Empty{}, &emptypb.Empty{})
	wantCode(t, err, codes.Unimplemented, "apipb.GobgpApi")
	if got := k.signals(); len(got) != 0 {
		t.Errorf("unserved calls reached the sink: %+v", got)
	}
}

// The sink's refusal is the call's error, in the sink's words; a sink
// that does not answer is cut off at the bound.
func TestSinkRefusal(t *testing.T) {
	k := &sink{refuse: errors.New("source fnm may not write 10.10.10.10/32: outside its prefixes")}
	c := apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: k})))
	req := &apipb.AddPathRequest{Path: fnmPath(t, "10.10.10.10", false)}
	_, err := c.AddPath(ctx5s(t), req)
	wantCode(t, err, codes.FailedPrecondition, "outside its prefixes", `source "fnm"`)

	k.refuse = signals.ErrInvalid
	_, err = c.AddPath(ctx5s(t), req)
	wantCode(t, err, codes.InvalidArgument, "invalid signal")

	// A panic (a bug) is the call's error, not the daemon's end.
	c = apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: panicky{}})))
	_, err = c.AddPath(ctx5s(t), req)
	wantCode(t, err, codes.Internal, "a bug, logged")

	slow := &sink{block: make(chan struct{})}
	c = apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: slow, AcceptTimeout: 50 * time.Millisecond})))
	_, err = c.AddPath(context.Background(), req) // no deadline of its own
	wantCode(t, err, codes.DeadlineExceeded, "not taken in time", "50ms")
}

// A request is at most MaxMessageBytes.
func TestMessageBound(t *testing.T) {
	k := &sink{}
	c := apipb.NewGobgpApiClient(dial(t, serve(t, Config{Sink: k})))
	p := fnmPath(t, "10.10.10.10", false)
	p.Pattrs = append(p.Pattrs, mustAny(t, &apipb.UnknownAttribute{Value: make([]byte, MaxMessageBytes)}))
	_, err := c.AddPath(ctx5s(t), &apipb.AddPathRequest{Path: p})
	wantCode(t, err, codes.ResourceExhausted)
	if got := k.signals(); len(got) != 0 {
		t.Errorf("an oversized call reached the sink: %+v", got)
	}
}

// A listener holds at most MaxConnections connections: one more is closed
// at once, and a slot freed takes a new one.
func TestConnectionCap(t *testing.T) {
	k := &sink{}
	addr := serve(t, Config{Sink: k})
	req := &apipb.AddPathRequest{Path: fnmPath(t, "10.10.10.10", false)}
	var ccs []*grpc.ClientConn
	for i := range MaxConnections {
		cc := dial(t, addr)
		if _, err := apipb.NewGobgpApiClient(cc).AddPath(ctx5s(t), req); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		ccs = append(ccs, cc)
	}
	extra := apipb.NewGobgpApiClient(dial(t, addr))
	_, err := extra.AddPath(ctx5s(t), req)
	wantCode(t, err, codes.Unavailable)

	ccs[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := extra.AddPath(ctx5s(t), req)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a freed slot was not taken within 30s: %v", err)
		}
	}
	if n := len(k.signals()); n != MaxConnections+1 {
		t.Errorf("sink got %d signals, want %d", n, MaxConnections+1)
	}
}

// The listener tells clients its bounds in HTTP/2 SETTINGS: at most
// MaxStreams calls at once per connection, MaxHeaderBytes of headers.
func TestStreamBound(t *testing.T) {
	addr := serve(t, Config{Sink: &sink{}})
	settings := serverSettings(t, addr)
	if got := settings[0x3]; got != MaxStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want %d", got, MaxStreams)
	}
	if got := settings[0x6]; got != MaxHeaderBytes {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d, want %d", got, MaxHeaderBytes)
	}
}

// serverSettings opens an HTTP/2 connection to addr and returns the
// server's first SETTINGS frame, id → value.
func serverSettings(t *testing.T, addr string) map[uint16]uint32 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	// The client preface and an empty SETTINGS frame.
	if _, err := conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	for {
		var h [9]byte
		if _, err := readFull(conn, h[:]); err != nil {
			t.Fatalf("read a frame header: %v", err)
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		body := make([]byte, n)
		if _, err := readFull(conn, body); err != nil {
			t.Fatalf("read a frame: %v", err)
		}
		if h[3] != 4 || h[4]&1 != 0 { // not SETTINGS, or an ACK
			continue
		}
		m := map[uint16]uint32{}
		for i := 0; i+6 <= len(body); i += 6 {
			m[uint16(body[i])<<8|uint16(body[i+1])] = uint32(body[i+2])<<24 | uint32(body[i+3])<<16 | uint32(body[i+4])<<8 | uint32(body[i+5])
		}
		return m
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Listen binds all addresses or none, and names the one that failed.
func TestListen(t *testing.T) {
	lns, err := Listen("fnm", []string{"127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	taken := lns[0].Addr().String()
	defer lns[0].Close()
	_, err = Listen("fnm", []string{"127.0.0.1:0", taken})
	if err == nil || !strings.Contains(err.Error(), taken) || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Listen on a taken port: %v, want an error naming %s", err, taken)
	}
}
