package e2e

import (
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rknotify "github.com/ribkeeper/ribkeeper/notify"
)

// TestNotifications: a signed webhook receiver configured with [[notify]]
// hears the BGP session with BIRD come up, go down when BIRD disables it
// and come back, in that order, each delivery signed; status shows the
// receiver's delivery state.
func TestNotifications(t *testing.T) {
	const secret = "e2e-notify-secret-0123456789"
	var (
		mu    sync.Mutex
		got   []rknotify.Payload
		bad   []string
		wake  = make(chan struct{}, 1)
		kinds = func() []rknotify.Kind {
			mu.Lock()
			defer mu.Unlock()
			var out []rknotify.Kind
			for _, p := range got {
				out = append(out, p.Kind)
			}
			return out
		}
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if want := rknotify.Sign(secret, r.Header.Get(rknotify.HeaderTimestamp), body); !hmac.Equal([]byte(want), []byte(r.Header.Get(rknotify.HeaderSignature))) {
			bad = append(bad, "bad signature on "+string(body))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p rknotify.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			bad = append(bad, err.Error())
		}
		got = append(got, p)
		select {
		case wake <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	dir := t.TempDir()
	d, bird := startPair(t, pair{rkAddr: "127.0.0.1", birdAddr: "127.0.0.2", site: "notify", dir: dir,
		store: fmt.Sprintf("[store]\npath = %q\n[[notify]]\nname = \"soc\"\nkind = \"webhook\"\nurl = %q\nsecret = %q\nevents = [\"peer.up\", \"peer.down\"]\n",
			filepath.Join(dir, "rk.db"), recv.URL+"/hook", secret)})

	wait := func(what string, n int) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for len(kinds()) < n {
			select {
			case <-wake:
			case <-deadline:
				t.Fatalf("waiting for %s: got %v; log:\n%s", what, kinds(), d.logTail(30))
			}
		}
	}
	wait("peer.up", 1)
	if _, err := bird.Birdc("disable", "up0"); err != nil {
		t.Fatal(err)
	}
	wait("peer.down", 2)
	if _, err := bird.Birdc("enable", "up0"); err != nil {
		t.Fatal(err)
	}
	wait("peer.up again", 3)

	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("bad deliveries: %v", bad)
	}
	want := []rknotify.Kind{rknotify.PeerUp, rknotify.PeerDown, rknotify.PeerUp}
	for i, p := range got[:3] {
		if p.Kind != want[i] || p.Peer == nil || p.Peer.Address != "127.0.0.2" || p.Site != "notify" || p.Summary == "" {
			t.Errorf("delivery %d = %+v, want %s of 127.0.0.2", i, p, want[i])
		}
		if i > 0 && p.ID <= got[i-1].ID {
			t.Errorf("delivery ids not increasing: %d after %d", p.ID, got[i-1].ID)
		}
	}
	if text := d.mustCLI("status"); !strings.Contains(text, "Notifications:") || !strings.Contains(text, "soc") {
		t.Errorf("status does not show the receiver:\n%s", text)
	}
	out := d.mustCLI("status", "--json")
	var st struct {
		Notifications []rknotify.TargetStatus `json:"notifications"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(st.Notifications) != 1 || st.Notifications[0].Name != "soc" || st.Notifications[0].Delivered < 3 {
		t.Errorf("status notifications = %+v", st.Notifications)
	}
}
