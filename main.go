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
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/buildinfo"
	"github.com/ribkeeper/ribkeeper/cli"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/console"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/gobgpv3"
	"github.com/ribkeeper/ribkeeper/ingest"
	"github.com/ribkeeper/ribkeeper/instance"
	"github.com/ribkeeper/ribkeeper/metrics"
	"github.com/ribkeeper/ribkeeper/playbook"
	"github.com/ribkeeper/ribkeeper/profile"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

// localCommands are the commands the program runs itself, as usage shows
// them; the bash completion completes them and their flags.
var localCommands = []cli.Local{
	{Name: "serve", Synopsis: "--config FILE [--accept-new-store]", About: "run the daemon (--accept-new-store: take a store that is not the one it ran with as the desired state)"},
	{Name: "check-config", Synopsis: "--config FILE", About: "validate a configuration file and exit"},
	{Name: "flowspec encode", Synopsis: "[--family ipv4|ipv6] 'match ... then ...'"},
	{Name: "flowspec decode", Synopsis: "--family ipv4|ipv6 HEX"},
	{Name: "profiles", Synopsis: "[RULE]", About: "the router profiles; with a rule, which of them take it"},
	{Name: "version", About: "version, commit, build date, Go and GoBGP versions (also --version)"},
	{Name: "completion bash", About: "the bash completion script (source it, or install it in /usr/share/bash-completion/completions/)"},
}

// localUsage is one line per local command.
func localUsage() string {
	var b strings.Builder
	for _, c := range localCommands {
		line := strings.TrimSpace("ribkeeper " + c.Name + " " + c.Synopsis)
		if c.About == "" {
			fmt.Fprintf(&b, "  %s\n", line)
			continue
		}
		fmt.Fprintf(&b, "  %-39s %s\n", line, c.About)
	}
	return b.String()
}

// usage is the program's overview; each client command's own usage (its
// --help) comes from api.
var usage = `ribkeeper: keeps a BGP FlowSpec table equal to a stored desired state

usage:
` + localUsage() + cli.Synopsis() + `
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
		accept, rest := acceptNewStore(args[1:])
		cfg, code := loadConfig("serve", rest, stderr)
		if cfg == nil {
			return code
		}
		if err := serve(ctx, cfg, accept, stderr); err != nil {
			fmt.Fprintf(stderr, "ribkeeper: %v\n", err)
			return 1
		}
		return 0
	case "check-config":
		cfg, code := loadConfig("check-config", args[1:], stderr)
		if cfg == nil {
			return code
		}
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(stderr, "%s: warning: %s\n", cfg.File, w)
		}
		fmt.Fprintf(stdout, "%s: ok (%d neighbors, %d dynamic neighbor prefixes, store %s, %d safelisted prefixes, %d sources, %d playbooks)\n",
			cfg.File, len(cfg.Neighbors), len(cfg.DynamicNeighbors), cfg.Store.Driver, len(cfg.Guardrails.Safelist), len(cfg.Sources), len(cfg.Playbooks))
		return 0
	case "flowspec":
		return flowspecCmd(args[1:], stdout, stderr)
	case "profiles":
		return profilesCmd(args[1:], stdout, stderr)
	case "completion":
		if len(args) != 2 || args[1] != "bash" {
			fmt.Fprint(stderr, "usage: ribkeeper completion bash (only bash is supported)\n")
			return 2
		}
		if err := cli.BashCompletion(stdout, localCommands); err != nil {
			fmt.Fprintf(stderr, "ribkeeper completion: %v\n", err)
			return 1
		}
		return 0
	case "version", "--version", "-version":
		buildinfo.Read().Write(stdout)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		if cli.IsCommand(args[0]) {
			return cli.Main(ctx, args, stdout, stderr)
		}
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
	cfg, err := loadChecked(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, 1
	}
	return cfg, 0
}

// loadChecked loads the configuration file at path and checks its static
// rules ([[rule]]) against its guardrails (admit.CheckStatic) and its
// playbooks against their sources' scope (playbook.Check): a static rule
// a guardrail refuses, or a playbook that would write outside its
// source's scope, is an error of the file, with its key and line.
func loadChecked(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	var es config.Errors
	for _, v := range admit.CheckStatic(cfg) {
		es = append(es, cfg.Problem(fmt.Sprintf("rule.%d.text", v.Index), "%s", v.Error()))
	}
	es = append(es, playbook.Check(cfg)...)
	if len(es) > 0 {
		return nil, es
	}
	return cfg, nil
}

// acceptNewStore takes --accept-new-store out of serve's arguments.
func acceptNewStore(args []string) (accept bool, rest []string) {
	for _, a := range args {
		if a == "--accept-new-store" || a == "-accept-new-store" {
			accept = true
			continue
		}
		rest = append(rest, a)
	}
	return accept, rest
}

// serve runs the daemon until ctx is cancelled or a part fails.
// acceptNewStore is the operator's word that a store which is not the
// one this appliance ran with is the desired state (store.Vouch).
func serve(ctx context.Context, cfg *config.Config, acceptNewStore bool, stderr io.Writer) error {
	log := hclog.New(&hclog.LoggerOptions{
		Name:       "ribkeeper",
		Level:      hclog.LevelFromString(cfg.Log.Level),
		JSONFormat: cfg.Log.Format == "json",
		Output:     stderr,
	})
	build := buildinfo.Read()
	log.Info("starting", "version", build.Short(), "commit", cmp.Or(build.Commit, "unknown"), "config", cfg.File, "site", cfg.Site, "asn", cfg.BGP.ASN, "store", cfg.Store.Driver)
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}

	// A second instance on the same socket or store stops here, before it
	// touches the store, the speaker or a router.
	own := instance.Config{Socket: cfg.API.Socket}
	if cfg.Store.Driver == "sqlite" {
		own.StoreFile = cfg.Store.Path
	}
	claim, err := instance.Claim(own)
	if err != nil {
		return err
	}
	defer claim.Release()

	st, err := store.Open(ctx, store.Config{Driver: cfg.Store.Driver, Path: cfg.Store.Path, DSN: cfg.Store.DSN, Site: cfg.Site,
		WriteTimeout: cfg.Store.WriteTimeout, IntegrityCheckInterval: cfg.Store.IntegrityCheckInterval,
		Logger: log.Named("store")})
	if err != nil {
		return err
	}
	defer st.Close()
	// A store that is not the one this appliance ran with, or that
	// failed its integrity check, is never taken for an empty desired
	// state: the daemon serves reads and status, refuses writes, and
	// keeps its BGP sessions down (held), so that routers with graceful
	// restart keep every rule they hold.
	held := vouchStore(ctx, log.Named("store"), st, cfg.Store.IdentityFile, acceptNewStore)
	// On PostgreSQL, one running instance per site, also before anything
	// starts.
	if err := st.ClaimSite(ctx); err != nil {
		return err
	}

	// Notifications never block what reports them (notify's contract).
	ns := newNotices(log.Named("notify"), cfg)
	bc := bgpConfig(cfg)
	bc.PeerChange = ns.peerChange
	// Graceful-restart sessions come up once the whole desired table is
	// in the speaker (rec.Loaded below): those routers get it complete
	// before End-of-RIB and sweep only what it lacks. Others come up at
	// once and get rules as they are loaded.
	bc.HoldPeers = true
	sp := bgp.New(log.Named("bgp"), bc)
	if err := sp.Start(ctx); err != nil {
		return err
	}
	// A stop keeps the rules on graceful-restart routers (no Cease);
	// `ribkeeper shutdown --withdraw` takes them down first.
	defer sp.Stop()

	mx := metrics.New(log.Named("metrics"))
	mx.SetBuild(metrics.Build{Version: build.Short(), Commit: cmp.Or(build.Commit, "unknown"), GoVersion: build.GoVersion, GoBGP: build.GoBGP})
	// The event stream (GET /v1/events) hears every pass: rules it
	// finished, and the peer changes that woke it.
	limits := apiLimits(cfg)
	log.Info("TCP API bounds", "open_file_limit", limits.NoFile, "max_connections", limits.MaxConnections,
		"max_event_streams", limits.Streams.Total, "max_event_streams_per_token", limits.Streams.PerToken)
	events := api.NewEvents(log.Named("events"), st, sp, time.Now,
		api.WithEventBytes(cfg.API.EventRingBytes, cfg.API.MaxEventBytes), api.WithStreamLimits(limits.Streams))
	rec := reconcile.New(log.Named("reconcile"), st, sp, reconcile.Config{
		ResyncInterval:     cfg.Reconcile.ResyncInterval,
		DryRun:             cfg.Reconcile.DryRun,
		MaxWithdrawPerPass: cfg.Reconcile.MaxWithdrawPerPass,
		AnnounceRate:       cfg.Reconcile.AnnounceRate,
		Recorder:           events.Recorder(mx),
		RuleFailed:         ns.ruleFailed,
	})
	mx.WatchNotifications(ns.n)
	mx.Watch(metrics.Sources{Rules: st, Drift: rec, Speaker: sp, Store: st})
	series := api.NewSeries(log.Named("series"), api.SeriesSources{Rules: st, Drift: rec, Peers: sp}, 0, 0, time.Now)
	// Every write, from the API, the configuration's static rules or
	// the guardrails' enforcement, goes through the admission gate.
	gate := admit.New(admit.Config{
		Store: st, Guardrails: cfg.Guardrails, Limits: cfg.Limits,
		Sendable: bgp.Sendable, Early: rec, EarlyReady: st.EarlyOK, EarlyWithdrawReady: st.EarlyWithdrawOK, Changed: events.Nudge, Log: log.Named("admit"),
		WriteTimeout: cfg.Store.WriteTimeout,
	})
	// The heap floor (memory.go) starts once the first load's light
	// collector is done, or at once when there is none.
	noLight := make(chan struct{})
	close(noLight)
	var lightDone <-chan struct{} = noLight
	if !held {
		// The first load builds the whole table at once: the collector
		// runs lightly until it is done (memory.go).
		gcCtx, gcDone := context.WithCancel(ctx)
		defer gcDone()
		lightDone = lightGCUntilLoaded(gcCtx, log.Named("memory"), rec.Loaded(), firstLoadHeap, 100*time.Millisecond, firstLoadLongest)
		// Guardrails changed while the daemon was down apply before the
		// first pass announces anything; the pass starts from the same
		// reading.
		if n, err := enforceAtStart(ctx, log.Named("guardrails"), st, gate, rec); err != nil {
			log.Error("checking active rules against the guardrails failed; nothing was withdrawn (restart or reload to retry)", "error", err)
		} else if n > 0 {
			log.Warn("rules withdrawn by guardrails at start", "count", n)
		}
		if err := gate.SyncStatic(ctx, cfg.Rules); err != nil {
			log.Error("storing the static rules ([[rule]]) failed", "error", err)
		}
	}
	// The daemon's signals.Sink: every way in (webhooks, Alertmanager,
	// FastNetMon) hands its signals to the playbook engine (pass engine
	// as their signals.Sink), which writes through the gate with the
	// source as actor.
	engine := playbook.New(playbook.Config{Gate: gate, Store: st, Rules: st, Notifier: ns.n, Changed: events.Incident, Log: log.Named("playbook")}, cfg)
	if err := engine.Load(ctx); err != nil {
		log.Error("the incidents of the last run could not be read; they are not continued (their rules expire by their TTL)", "error", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recCtx, stopRec := context.WithCancel(ctx)
	sd := &shutdowner{log: log.Named("shutdown"), sp: sp, stopRec: stopRec, recDone: make(chan struct{}), stopAll: cancel}
	// Detectors' signals ([[source]]): the HTTP ways in record every one
	// in a ring (GET /v1/signals) and hand it to the engine.
	recent := signals.NewRecent(0)
	ways, err := ingest.New(log.Named("ingest"), cfg.Sources, engine, recent, nil)
	if err != nil {
		return err
	}
	srv := api.New(log.Named("api"), st, gate, sp, api.WithMetrics(mx.Handler(), mx), api.WithReconciler(rec),
		api.WithShutdown(sd), api.WithShutdownTimeout(shutdownWait+10*time.Second),
		api.WithEvents(events), api.WithSeries(series), api.WithConsole(console.Handler()),
		api.WithNotifications(ns.n), api.WithStoreCondition(st), api.WithIncidents(engine), api.WithSignals(ways, recent))
	tcp := tcpConfig(cfg)
	// Fail before anything is announced, not after.
	if tcp != nil {
		tcp.MaxConnections = limits.MaxConnections
		if err := api.CheckTCP(*tcp); err != nil {
			return fmt.Errorf("[api] listen: %w", err)
		}
	}

	// Detectors that speak GoBGP v3's API (FastNetMon with gobgp = on):
	// their listeners are bound here, before anything is announced, so a
	// port held by a gobgpd stops the start with the reason. Their
	// signals go to the engine through the ring of recent signals.
	detectors, err := gobgpSources(cfg, log.Named("gobgpv3"), recent.Recording(engine, config.SourceGoBGP, nil))
	if err != nil {
		return err
	}

	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	fail := func(name string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			once.Do(func() { firstErr = fmt.Errorf("%s: %w", name, err) })
		}
	}
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f(ctx)
			if err == nil && ctx.Err() == nil {
				// Every part runs until the daemon stops: one that
				// returns on its own is a defect, not a clean stop.
				err = fmt.Errorf("stopped on its own while the daemon was running (a defect: report it with this log); restart ribkeeper")
			}
			fail(name, err)
			cancel() // one part stopping stops all
		}()
	}
	// The reconciler has its own context: a shutdown stops it first, so
	// that nothing re-announces what is being withdrawn. A held store
	// runs neither the reconciler nor the BGP sessions.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(sd.recDone)
		if held {
			return
		}
		if err := rec.Run(recCtx); err != nil {
			fail("reconcile", err)
			cancel()
		}
	}()
	go func() {
		if held {
			return
		}
		select {
		case <-rec.Loaded():
		case <-ctx.Done():
			return
		}
		if err := sp.StartPeers(ctx); err != nil {
			fail("bgp peers", err)
			cancel()
		}
	}()
	if !held && cfg.Store.IdentityFile != "" {
		goRun("store identity", func(ctx context.Context) error {
			st.KeepRecord(ctx, cfg.Store.IdentityFile)
			return nil
		})
	}
	goRun("retention", func(ctx context.Context) error {
		purgeHistory(ctx, log.Named("retention"), st, cfg.Store.HistoryRetention, time.Now)
		return nil
	})
	goRun("memory", func(ctx context.Context) error {
		releaseAfterBursts(ctx, log.Named("memory"), rec.WorkCount)
		return nil
	})
	goRun("heap floor", func(ctx context.Context) error {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		keepHeapFloor(ctx, lightDone, heapFloor, t.C, rec.ChangeCount)
		return nil
	})
	if cfg.BGP.CompactAfter > 0 {
		goRun("compactor", func(ctx context.Context) error {
			sp.Compactor(ctx, cfg.BGP.CompactAfter, time.Second) // Leaked is O(1)
			return nil
		})
	}
	goRun("playbook", engine.Run)
	rl := &reloader{log: log.Named("reload"), cur: cfg, sp: sp, gate: gate, api: srv, engine: engine, ingest: ways, started: cfg, notices: ns}
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
	for name, serve := range detectors {
		goRun("[[source]] "+name, serve)
	}
	goRun("events", events.Run)
	goRun("notify", ns.n.Run)
	goRun("series", series.Run)
	goRun("api", func(ctx context.Context) error { return srv.Serve(ctx, cfg.API.Socket) })
	if tcp != nil {
		goRun("api tcp", func(ctx context.Context) error { return srv.ServeTCP(ctx, *tcp) })
		log.Info("console: open it in a browser", "url", consoleURL(*tcp))
	}
	log.Info("serving", "socket", cfg.API.Socket, "bgp_port", cfg.BGP.ListenPort, "neighbors", len(cfg.Neighbors))
	wg.Wait()
	log.Info("stopped")
	return firstErr
}

// gobgpSources binds the listeners of every gobgp source and returns,
// by source name, what serves them until its context ends; the signals
// go to sink.
func gobgpSources(cfg *config.Config, log hclog.Logger, sink signals.Sink) (map[string]func(context.Context) error, error) {
	out := map[string]func(context.Context) error{}
	var bound [][]net.Listener
	fail := func(err error) (map[string]func(context.Context) error, error) {
		for _, lns := range bound {
			for _, l := range lns {
				l.Close()
			}
		}
		return nil, err
	}
	for _, src := range cfg.Sources {
		if src.Kind != config.SourceGoBGP {
			continue
		}
		c := gobgpv3.Config{Source: src.Name, Sink: sink, Log: log}
		if src.TLSCert != "" {
			t, err := gobgpv3.TLSConfig(src.TLSCert, src.TLSKey, src.TLSClientCA)
			if err != nil {
				return fail(fmt.Errorf("[[source]] %q: %w", src.Name, err))
			}
			c.TLS = t
		}
		lns, err := gobgpv3.Listen(src.Name, src.Listen)
		if err != nil {
			return fail(err)
		}
		bound = append(bound, lns)
		srv := gobgpv3.New(c)
		out[src.Name] = func(ctx context.Context) error { return srv.Serve(ctx, lns...) }
	}
	return out, nil
}

// apiLimits are the TCP API's bounds: those of cfg, the others derived
// from the open-file limit (whose soft value Go raised to the hard one
// at start).
func apiLimits(cfg *config.Config) api.Limits {
	l := api.DeriveLimits(api.OpenFileLimit())
	if cfg.API.MaxConnections > 0 {
		l.MaxConnections = cfg.API.MaxConnections
		l.Streams.Total = min(max(l.MaxConnections/2, 1), l.Streams.Total)
	}
	if cfg.API.MaxEventStreams > 0 {
		l.Streams.Total = cfg.API.MaxEventStreams
	}
	l.Streams.PerToken = cfg.API.MaxEventStreamsPerToken
	return l
}

// consoleURL is where the TCP listener serves the console.
func consoleURL(c api.TCPConfig) string {
	scheme := "http"
	if c.CertFile != "" {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return scheme + "://" + c.Addr + "/ui/"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost" // listening everywhere: any of the host's names
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/ui/"
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
		printAttributes(stdout, r)
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
	if canon := m.AppendTo(nil); !bytes.Equal(canon, b[:n]) {
		// DecodeMatch accepted input the RFCs tell a decoder to ignore
		// or only recommend against, and normalised it.
		fmt.Fprintf(stdout, "match %s\ncanonical nlri: %s (normalised: this is what ribkeeper would send and how it keys the rule)\n", m, hex.EncodeToString(canon))
		return 0
	}
	fmt.Fprintf(stdout, "match %s\n", m)
	return 0
}

// shutdownWait bounds how long `ribkeeper shutdown --withdraw` waits for
// the withdrawals to reach the routers before closing the sessions with a
// Cease (which makes them flush anyway).
const shutdownWait = 30 * time.Second

// shutdowner stops the daemon on `ribkeeper shutdown` (api.Shutdowner).
type shutdowner struct {
	log     hclog.Logger
	sp      *bgp.Speaker
	stopRec context.CancelFunc // stops the reconciler
	recDone chan struct{}      // closed when it has stopped
	stopAll context.CancelFunc // then everything else
}

func (s *shutdowner) Shutdown(ctx context.Context, withdraw bool) error {
	s.stopRec()
	<-s.recDone // no pass in flight re-announces what is withdrawn
	defer s.stopAll()
	if !withdraw {
		s.sp.Stop()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, shutdownWait)
	defer cancel()
	s.log.Warn("withdrawing every rule from every router before stopping")
	if err := s.sp.StopWithdrawn(ctx); err != nil {
		s.log.Error("withdrawing everything", "error", err)
		return err
	}
	s.log.Info("every rule withdrawn; stopping")
	return nil
}

// printAttributes writes one line per path attribute value that carries
// r's action, in the order the speaker sends them (bgp.flowSpecPath,
// bgp.routePath): every 8-byte extended community (EXTENDED COMMUNITIES,
// type 16), every 20-byte IPv6-address-specific one (type 25, RFC 5701:
// redirect-ip to an IPv6 address, ext6), and for a route every standard
// community (COMMUNITIES, type 8) and the next hop. Each line gives the
// wire bytes and the action text they stand for.
func printAttributes(w io.Writer, r flowspec.Rule) {
	ext := r.Action.AppendExtCommunities(nil)
	for i := 0; i+8 <= len(ext); i += 8 {
		fmt.Fprintf(w, "extended-community: %s %s\n", hex.EncodeToString(ext[i:i+8]), communityText(ext[i:i+8], nil))
	}
	ext6 := r.Action.AppendIPv6ExtCommunities(nil)
	for i := 0; i+20 <= len(ext6); i += 20 {
		fmt.Fprintf(w, "ipv6-extended-community: %s %s\n", hex.EncodeToString(ext6[i:i+20]), communityText(nil, ext6[i:i+20]))
	}
	if !r.Match.Family().IsRoute() {
		return
	}
	comms := r.Action.AppendCommunities(nil)
	for i := 0; i+4 <= len(comms); i += 4 {
		c := binary.BigEndian.Uint32(comms[i:])
		fmt.Fprintf(w, "community: %s (%s)\n", hex.EncodeToString(comms[i:i+4]), flowspec.CommunityString(c))
	}
	switch nh, ok := r.Action.NextHop(); {
	case ok:
		fmt.Fprintf(w, "next-hop: %s\n", nh)
	case r.Match.Family() == flowspec.IPv4Unicast:
		fmt.Fprintln(w, "next-hop: each site's [rtbh] next_hop_ipv4 (the rule sets none)")
	default:
		fmt.Fprintln(w, "next-hop: each site's [rtbh] next_hop_ipv6 (the rule sets none)")
	}
}

// communityText is the action text of one extended community.
func communityText(ext, ext6 []byte) string {
	a, err := flowspec.DecodeActionIPv6(ext, ext6)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return "(" + a.String() + ")"
}

// profilesCmd lists the router profiles (contrib/routers/README.md tells
// which to pick) or, given a rule, says which of them take it.
func profilesCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		for _, p := range profile.All() {
			fmt.Fprintf(stdout, "%-8s %s\n", p.Name, p.About)
		}
		return 0
	}
	r, err := flowspec.Parse(strings.Join(args, " "))
	if err != nil {
		fmt.Fprintf(stderr, "ribkeeper profiles: %v\n", err)
		return 1
	}
	for _, p := range profile.All() {
		if why := p.Check(r); why != nil {
			fmt.Fprintf(stdout, "%-8s held back: %s\n", p.Name, why)
		} else if p.MaxRules > 0 {
			fmt.Fprintf(stdout, "%-8s sent if among the first %d rules in precedence order (its cap)\n", p.Name, p.MaxRules)
		} else {
			fmt.Fprintf(stdout, "%-8s sent\n", p.Name)
		}
	}
	return 0
}

// vouchStore decides at start whether the store may be taken as the
// desired state, and reports true when it is held: it failed its
// integrity check, or it is not the one this appliance last ran with
// (store.Vouch, against the identity file) and the operator did not
// confirm it with --accept-new-store. A record or store that cannot be
// read holds it too: unknown is not empty.
func vouchStore(ctx context.Context, log hclog.Logger, st *store.Store, identityFile string, accept bool) (held bool) {
	if r := st.Refusal(); r != nil {
		log.Error("the store is not usable: BGP sessions stay down and writes are refused, so that routers with graceful restart keep the rules they hold", "reason", r.Kind, "next", r.Msg)
		return true
	}
	if identityFile == "" {
		return false
	}
	v, err := st.Vouch(ctx, identityFile, accept)
	switch {
	case err != nil:
		log.Error("cannot tell whether the store is the one this appliance ran with: BGP sessions stay down and writes are refused; fix the error and restart", "error", err)
		st.Hold("cannot tell whether the store is the one this appliance ran with: " + err.Error())
		return true
	case v.Held:
		log.Error("refusing to take the routers' rules away: "+v.Line, "was", v.Was.Identity.String(), "now", v.Now.String(),
			"next", "restore the store this appliance ran with and restart, or restart with 'ribkeeper serve --accept-new-store' to make this store the desired state")
		return true
	case v.Accepted:
		log.Warn("taking a new store as the desired state, as the operator said (--accept-new-store): routers drop every rule it lacks", "was", v.Was.Identity.String(), "now", v.Now.String())
	case v.New:
		log.Info("recording the store's identity", "file", identityFile, "store", v.Now.String())
	}
	return false
}
