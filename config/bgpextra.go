package config

import (
	"net"
	"net/netip"
)

// Defaults of the storm-control and compaction keys.
const (
	DefaultAnnounceRate = 20000
	// DefaultCompactAfter bounds GoBGP v3.37.0's leak of one table
	// destination per distinct withdrawn NLRI: ~630 B of live heap each,
	// ~2.5 KB of RSS per churned rule for raw GoBGP in BENCHMARKS.md, so
	// about 0.5 GB before a compaction. Each compaction resets the BGP
	// sessions once (routers drop the rules until they are re-announced).
	DefaultCompactAfter = 200_000
)

// grpcAndCompaction checks [bgp] grpc_listen, grpc_allow_remote and
// compact_after.
func (v *validator) grpcAndCompaction(f *file, c *Config) {
	if s := f.BGP.GRPCListen; s != "" {
		host, port, err := net.SplitHostPort(s)
		a, aerr := netip.ParseAddr(host)
		switch {
		case err != nil || port == "":
			v.add("bgp.grpc_listen", "%q is not host:port (e.g. \"127.0.0.1:50051\")", s)
		case aerr != nil:
			v.add("bgp.grpc_listen", "%q: the host must be an IP address", s)
		case !a.IsLoopback() && !f.BGP.GRPCAllowRemote:
			v.add("bgp.grpc_listen", "%q is not a loopback address and GoBGP's gRPC API has no authentication: set grpc_allow_remote = true to accept", s)
		default:
			c.BGP.GRPCListen = s
		}
	}
	c.BGP.GRPCAllowRemote = f.BGP.GRPCAllowRemote
	c.BGP.CompactAfter = v.nonNegative("bgp.compact_after", f.BGP.CompactAfter, DefaultCompactAfter, "use 0 to never compact")
}
