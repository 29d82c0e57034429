package gobgpv3

import (
	"testing"

	apipb "github.com/osrg/gobgp/v3/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Whatever a client sends as a path, decodePath returns a prefix that
// makes a valid signal target, or an error; it never panics.
func FuzzDecodePath(f *testing.F) {
	for _, p := range []*apipb.Path{
		fnmPath(f, "10.10.10.10", false),
		fnmPath(f, "2001:db8::1", true),
		{Nlri: &anypb.Any{TypeUrl: urlPrefix, Value: []byte{8, 33, 18, 2, '1', '.'}}},
		{Nlri: mustAny(f, &apipb.IPAddressPrefix{Prefix: "::ffff:10.0.0.1", PrefixLen: 128}),
			Pattrs: []*anypb.Any{{TypeUrl: urlLarge, Value: []byte{10, 2, 8, 1}}, {TypeUrl: urlMpReach, Value: []byte{18, 1, 'x'}}}},
	} {
		b, err := proto.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p apipb.Path
		if proto.Unmarshal(b, &p) != nil {
			return
		}
		d, err := decodePath(&p)
		if err != nil {
			return
		}
		if !d.prefix.IsValid() || d.prefix != d.prefix.Masked() {
			t.Fatalf("decodePath accepted %v, not a masked prefix", d.prefix)
		}
		if s := d.detail("AddPath"); len(s) > 1024 {
			t.Fatalf("detail of %d bytes", len(s))
		}
	})
}
