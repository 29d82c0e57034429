package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/config"
)

// Of GoBGP v3 only the generated api package is linked (for the GoBGP v3
// listener of detectors, package gobgpv3): no v3 parser, table or server
// code, so that every BGP message ribkeeper parses goes through GoBGP v4
// alone, the parsers the hostile-peer tests cover.
func TestGoBGPv3OnlyAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps .: %v\n%s", err, out)
	}
	const v3 = "github.com/osrg/gobgp/v3"
	linked := false
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == v3+"/api":
			linked = true
		case p == v3 || strings.HasPrefix(p, v3+"/"):
			t.Errorf("%s is linked into ribkeeper: only %s/api may be (gobgpv3 reads the NLRI and attributes itself)", p, v3)
		}
	}
	if !linked {
		t.Errorf("%s/api is not linked: the GoBGP v3 listener (gobgpv3) is not wired in main", v3)
	}
}

// A gobgp source's listeners are bound at start: a reload that changes
// them says it takes a restart; another source's change does not.
func TestReloadGoBGPListenersNeedRestart(t *testing.T) {
	src := func(kind, listen string) *config.Config {
		return &config.Config{Sources: []config.Source{{Name: "fnm", Kind: kind, Listen: []string{listen}}}}
	}
	keys := restartOnly(src(config.SourceGoBGP, "127.0.0.1:50051"), src(config.SourceGoBGP, "127.0.0.1:50052"))
	if len(keys) != 1 || !strings.Contains(keys[0], "gobgp source") {
		t.Errorf("restartOnly = %q, want the gobgp source's listen", keys)
	}
	if keys := restartOnly(src(config.SourceWebhook, ""), src(config.SourceWebhook, "x")); len(keys) != 0 {
		t.Errorf("restartOnly = %q for a webhook source, want nothing", keys)
	}
}
