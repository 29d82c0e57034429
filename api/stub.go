package api

// TEMPORARY: the contract main.go calls; the api helper replaces this file.

import (
	"context"
	"io"

	"github.com/hashicorp/go-hclog"
)

// Server serves the HTTP JSON API on the control socket.
type Server struct{}

// Serve listens on the unix socket path and serves until ctx is done.
func (s *Server) Serve(ctx context.Context, socketPath string) error { <-ctx.Done(); return nil }

var _ = hclog.Default

// RunCLI runs a client subcommand ("rule ...", "rib") against the control
// socket and returns the process exit code.
func RunCLI(ctx context.Context, socketPath string, args []string, stdout, stderr io.Writer) int {
	return 2
}
