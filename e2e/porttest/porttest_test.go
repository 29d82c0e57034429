package porttest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// A number handed out stays reserved until the test ends, and a number
// some process listens on, on any address, does not count as free.
func TestFreeReservesAndChecksEveryAddress(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "ribkeeper-test-ports")
	var got int
	t.Run("hand out", func(t *testing.T) {
		got = Free(t, "127.0.0.2")
		if f, ok := reserve(dir, got); ok {
			f.Close()
			t.Fatalf("port %d handed out but another test could reserve it", got)
		}
	})
	// The subtest ended: its reservation is released.
	f, ok := reserve(dir, got)
	if !ok {
		t.Fatalf("port %d still reserved after its test ended", got)
	}
	f.Close()

	l, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	if free("127.0.0.2", p) {
		t.Errorf("port %d counted free on 127.0.0.2 though a listener holds it on 127.0.0.3", p)
	}
}
