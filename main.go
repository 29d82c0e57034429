// Command ribkeeper is a BGP FlowSpec route server for an edge appliance: it
// embeds GoBGP, peers with upstream routers, and keeps what it announces
// exactly equal to the rules stored in its database.
//
// main.go only parses the command line, wires the packages together and
// handles signals; everything else lives in the packages.
//
// Go 1.24+ opens Multipath TCP sockets by default, and Linux refuses the TCP
// MD5 signature option (RFC 2385) on those; BGP sessions with a password
// need plain TCP, hence the directive below.
//
//go:debug multipathtcp=0
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// usage is the program's overview; each client command's own usage (its
// --help) comes from api.
var usage = `ribkeeper: keeps a BGP FlowSpec table equal to a stored desired state

usage:
  ribkeeper serve --config FILE           run the daemon
  ribkeeper check-config --config FILE    validate a configuration file and exit
  ribkeeper flowspec encode [--family ipv4|ipv6] 'match ... then ...'
  ribkeeper flowspec decode --family ipv4|ipv6 HEX
` + api.CLISynopsis() + `
Run 'ribkeeper COMMAND --help' for a command's flags.
Client commands reach the daemon over its control socket: --socket PATH,
or the socket named in --config FILE, or $RIBKEEPER_SOCKET, or
./data/ribkeeper.sock; or over the TCP API: --url URL (or $RIBKEEPER_URL)
with a token from --token-file FILE or $RIBKEEPER_TOKEN, and --ca-file FILE
for a private CA.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "serve":
		cfg, code := loadConfig("serve", args[1:], stderr)
		if cfg == nil {
			return code
		}
		if err := serve(ctx, cfg, stderr); err != nil {
			fmt.Fprintf(stderr, "ribkeeper: %v\n", err)
			return 1
		}
		return 0
	case "check-config":
		cfg, code := loadConfig("check-config", args[1:], stderr)
		if cfg == nil {
			return code
		}
		fmt.Fprintf(stdout, "%s: ok (%d neighbors, %d dynamic neighbor prefixes, store %s, %d safelisted prefixes)\n",
			cfg.File, len(cfg.Neighbors), len(cfg.DynamicNeighbors), cfg.Store.Driver, len(cfg.Guardrails.Safelist))
		return 0
	case "flowspec":
		return flowspecCmd(args[1:], stdout, stderr)
	case "rule", "route", "rib", "peers", "status", "diff":
		return api.ClientMain(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ribkeeper: unknown command %q (see 'ribkeeper --help')\n", args[0])
		return 2
	}
}

// loadConfig parses "--config FILE" and loads it. On failure it prints every
// problem and returns a nil Config with the exit code: 2 for usage, 1 for a
// bad file.
func loadConfig(name string, args []string, stderr io.Writer) (*config.Config, int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "configuration file (TOML)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "usage: ribkeeper %s --config FILE\n", name)
			return nil, 0
		}
		fmt.Fprintf(stderr, "ribkeeper %s: %v (usage: ribkeeper %s --config FILE)\n", name, err, name)
		return nil, 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ribkeeper %s: usage: ribkeeper %s --config FILE\n", name, name)
		return nil, 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, 1
	}
	return cfg, 0
}

// serve runs the daemon until ctx is cancelled or a part fails.
func serve(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	log := hclog.New(&hclog.LoggerOptions{
		Name:       "ribkeeper",
		Level:      hclog.LevelFromString(cfg.Log.Level),
		JSONFormat: cfg.Log.Format == "json",
		Output:     stderr,
	})
	log.Info("starting", "config", cfg.File, "site", cfg.Site, "asn", cfg.BGP.ASN, "store", cfg.Store.Driver)

	st, err := store.Open(ctx, store.Config{Driver: cfg.Store.Driver, Path: cfg.Store.Path, DSN: cfg.Store.DSN, Site: cfg.Site})
	if err != nil {
		return err
	}
	defer st.Close()

	sp := bgp.New(log.Named("bgp"), bgpConfig(cfg))
	if err := sp.Start(ctx); err != nil {
		return err
	}
	defer sp.Stop()

	mx := api.NewMetrics(log.Named("metrics"))
	rec := reconcile.New(log.Named("reconcile"), st, sp, reconcile.Config{
		ResyncInterval:     cfg.Reconcile.ResyncInterval,
		DryRun:             cfg.Reconcile.DryRun,
		MaxWithdrawPerPass: cfg.Reconcile.MaxWithdrawPerPass,
		AnnounceRate:       cfg.Reconcile.AnnounceRate,
		Recorder:           mx,
	})
	mx.Watch(api.MetricsSources{Rules: st, Drift: rec, Speaker: sp})
	guards := config.NewGuardHolder(cfg.Guardrails)
	// Guardrails changed while the daemon was down apply before the first
	// pass announces anything.
	if n, err := enforceGuardrails(ctx, log.Named("guardrails"), st, &cfg.Guardrails, time.Now()); err != nil {
		log.Error("checking active rules against the guardrails failed", "error", err)
	} else if n > 0 {
		log.Warn("rules withdrawn by guardrails at start", "count", n)
	}
	if err := syncStatic(ctx, log.Named("static"), st, cfg.Rules); err != nil {
		log.Error("storing the static rules ([[rule]]) failed", "error", err)
	}
	srv := api.New(log.Named("api"), api.Guarded(st, guards), sp, api.WithMetrics(mx.Handler(), mx), api.WithReconciler(rec))
	var tcp *api.TCPConfig
	if cfg.API.Listen != "" {
		tcp = &api.TCPConfig{Addr: cfg.API.Listen, CertFile: cfg.API.TLSCert, KeyFile: cfg.API.TLSKey}
		for _, t := range cfg.API.Tokens {
			tcp.Tokens = append(tcp.Tokens, api.Token{Name: t.Name, Role: api.Role(t.Role), Secret: t.Secret})
		}
		// Fail before anything is announced, not after.
		if err := api.CheckTCP(*tcp); err != nil {
			return fmt.Errorf("[api] listen: %w", err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				once.Do(func() { firstErr = fmt.Errorf("%s: %w", name, err) })
			}
			cancel() // one part stopping stops all
		}()
	}
	goRun("reconcile", rec.Run)
	goRun("retention", func(ctx context.Context) error {
		purgeHistory(ctx, log.Named("retention"), st, cfg.Store.HistoryRetention, time.Now)
		return nil
	})
	goRun("memory", func(ctx context.Context) error {
		releaseAfterBursts(ctx, log.Named("memory"), rec.ChangeCount)
		return nil
	})
	if cfg.BGP.CompactAfter > 0 {
		goRun("compactor", func(ctx context.Context) error {
			sp.Compactor(ctx, cfg.BGP.CompactAfter, time.Second) // Leaked is O(1)
			return nil
		})
	}
	rl := &reloader{log: log.Named("reload"), cur: cfg, sp: sp, st: st, guard: guards, now: time.Now}
	goRun("reload", func(ctx context.Context) error {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				log.Info("SIGHUP: reloading the configuration", "config", cfg.File)
				rl.reload(ctx)
			}
		}
	})
	goRun("api", func(ctx context.Context) error { return srv.Serve(ctx, cfg.API.Socket) })
	if tcp != nil {
		goRun("api tcp", func(ctx context.Context) error { return srv.ServeTCP(ctx, *tcp) })
	}
	log.Info("serving", "socket", cfg.API.Socket, "bgp_port", cfg.BGP.ListenPort, "neighbors", len(cfg.Neighbors))
	wg.Wait()
	log.Info("stopped")
	return firstErr
}

// flowspecCmd encodes rule text to wire bytes and back, for operators
// debugging captures; it needs no daemon.
func flowspecCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "encode" && args[0] != "decode") {
		fmt.Fprint(stderr, "usage: ribkeeper flowspec encode [--family ipv4|ipv6] 'match ... then ...'\n       ribkeeper flowspec decode --family ipv4|ipv6 HEX\n")
		return 2
	}
	fs := flag.NewFlagSet("flowspec "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	famText := fs.String("family", "", "ipv4 or ipv6")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var fam flowspec.Family
	if *famText != "" {
		f, err := flowspec.ParseFamily(*famText)
		if err != nil {
			fmt.Fprintf(stderr, "ribkeeper: --family: %v\n", err)
			return 2
		}
		fam = f
	}
	in := strings.Join(fs.Args(), " ")
	if in == "" {
		fmt.Fprintln(stderr, "ribkeeper: nothing to "+args[0])
		return 2
	}
	if args[0] == "encode" {
		var r flowspec.Rule
		var err error
		if fam == 0 {
			r, err = flowspec.Parse(in)
		} else {
			r, err = flowspec.ParseIn(fam, in)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ribkeeper: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "family: %s\nnlri: %s\n", r.Match.Family(), hex.EncodeToString(r.Match.AppendTo(nil)))
		ext := r.Action.AppendExtCommunities(nil)
		for i := 0; i+8 <= len(ext); i += 8 {
			fmt.Fprintf(stdout, "extended-community: %s\n", hex.EncodeToString(ext[i:i+8]))
		}
		fmt.Fprintf(stdout, "text: %s\n", r)
		return 0
	}
	if fam == 0 {
		fmt.Fprintln(stderr, "ribkeeper: flowspec decode needs --family ipv4 or --family ipv6")
		return 2
	}
	b, err := hex.DecodeString(strings.ReplaceAll(strings.ReplaceAll(in, " ", ""), ":", ""))
	if err != nil {
		fmt.Fprintf(stderr, "ribkeeper: not hex: %v\n", err)
		return 1
	}
	m, n, err := flowspec.DecodeMatch(fam, b)
	if err != nil {
		fmt.Fprintf(stderr, "ribkeeper: %v\n", err)
		return 1
	}
	if n != len(b) {
		fmt.Fprintf(stderr, "ribkeeper: %d trailing bytes after the NLRI at offset %d\n", len(b)-n, n)
		return 1
	}
	fmt.Fprintf(stdout, "match %s\n", m)
	return 0
}
