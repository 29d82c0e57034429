// Package buildinfo says which ribkeeper this is: the version, commit and
// build date the Makefile stamps at link time, and the Go and GoBGP
// versions the binary was built with.
//
// `make build` sets the three stamped strings with
//
//	-ldflags "-X github.com/ribkeeper/ribkeeper/buildinfo.version=V
//	          -X github.com/ribkeeper/ribkeeper/buildinfo.commit=C
//	          -X github.com/ribkeeper/ribkeeper/buildinfo.date=D"
//
// (the linker can only set package-level strings, hence the variables). A
// plain `go build` leaves them empty, and Read says the binary was not
// stamped; a `make build` outside a git checkout stamps the commit as
// NoCommit, and Read says so.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set by the linker (see the package comment); never written at run time.
var (
	version string
	commit  string
	date    string
)

// NoCommit is the commit the Makefile stamps when it builds outside a git
// checkout (from a source archive).
const NoCommit = "none"

// gobgpModule is the module path of the embedded BGP speaker.
const gobgpModule = "github.com/osrg/gobgp/v4"

// Info describes one build.
type Info struct {
	Version   string // git describe, e.g. v1.2.0-3-gabc1234; "" when not stamped
	Commit    string // full commit hash; NoCommit outside git; "" when not stamped
	Date      string // build time, RFC 3339 UTC; "" when not stamped
	GoVersion string // e.g. go1.26.8
	GoBGP     string // version of github.com/osrg/gobgp/v4, e.g. v4.8.0
}

// Read returns this binary's build information.
func Read() Info {
	i := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == gobgpModule {
				i.GoBGP = d.Version
				if d.Replace != nil {
					i.GoBGP = d.Replace.Version
				}
			}
		}
		if i.Commit == "" {
			// A `go build -buildvcs=true` records the commit itself.
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					i.Commit = s.Value
				}
			}
		}
	}
	if i.GoBGP == "" {
		i.GoBGP = "unknown"
	}
	return i
}

// Stamped reports whether the build set the version (`make build`).
func (i Info) Stamped() bool { return i.Version != "" }

// Short is the version for a log line or a metric label: the stamped
// version, or "unknown" when the binary was not built by `make build`.
func (i Info) Short() string {
	if i.Version == "" {
		return "unknown"
	}
	return i.Version
}

// Write prints i for `ribkeeper version`, one fact a line.
func (i Info) Write(w io.Writer) {
	fmt.Fprintf(w, "ribkeeper %s\n", i.Short())
	switch {
	case !i.Stamped():
		fmt.Fprintln(w, "  (not stamped: built without `make build`, which sets the version, commit and date)")
	case i.Commit == NoCommit:
		fmt.Fprintln(w, "  (built outside a git checkout: no commit is known; set VERSION=... for make to name it)")
	}
	fmt.Fprintf(w, "commit:  %s\n", orUnknown(i.Commit))
	fmt.Fprintf(w, "built:   %s\n", orUnknown(i.Date))
	fmt.Fprintf(w, "go:      %s\n", i.GoVersion)
	fmt.Fprintf(w, "gobgp:   %s\n", i.GoBGP)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
