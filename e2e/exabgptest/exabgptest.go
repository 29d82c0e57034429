// Package exabgptest runs Debian's ExaBGP (4.2) in tests, as a receiver
// and as a sender.
//
// Each Speaker is its own exabgp process with a generated configuration
// in a temporary directory, listening on one loopback address only, run
// in the foreground without dropping privileges, without the CLI's named
// pipes in /run and without API acknowledgements (see env).
//
// As a receiver (Options.Receive) it hands every UPDATE and session event
// to an API process that appends ExaBGP's JSON encoding, one message a
// line, to a file; Flows, Unicast and Ups read that file, so a test checks
// ExaBGP's own decoding of what it received.
//
// As a sender, Send writes API commands ("announce flow route ...",
// "withdraw flow route ...") to a FIFO that ExaBGP's API process copies
// to ExaBGP.
//
// When exabgp is missing the test fails if the CI environment variable is
// set (CI must install Debian's exabgp package) and is skipped otherwise.
package exabgptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/porttest"
)

// Peer is one BGP neighbor of the ExaBGP speaker.
type Peer struct {
	Address string // neighbor IP (loopback)
	Port    int    // neighbor's BGP port, dialled unless Passive
	ASN     uint32
	Passive bool // wait for the neighbor to connect
}

// Options configures a Speaker.
type Options struct {
	RouterID string // default: Address
	Address  string // local address, e.g. 127.0.0.4
	Port     int    // local BGP port ExaBGP listens on; 0 picks a free one
	ASN      uint32
	Peers    []Peer
	// Receive records every UPDATE and session event from the peers.
	Receive bool
}

// Speaker is a running exabgp.
type Speaker struct {
	Options
	Dir    string
	recv   string // JSON lines file (Receive)
	cmds   *os.File
	cmd    *exec.Cmd
	exited chan struct{}
}

// Binary returns the path of exabgp, or fails/skips the test when missing.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("exabgp")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("exabgp not found but CI is set: .ci/run must install Debian's exabgp package")
		}
		t.Skipf("exabgp not found (apt-get install exabgp to run this test)")
	}
	return p
}

// Version returns ExaBGP's version, e.g. "4.2.21".
func Version(t testing.TB) string {
	t.Helper()
	out, _ := exec.Command(Binary(t), "--version").CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "ExaBGP" {
			return strings.TrimSpace(v)
		}
	}
	return strings.TrimSpace(string(out))
}

// freePort is a port reserved for t and free on every address (package
// porttest).
func freePort(t testing.TB, addr string) int {
	t.Helper()
	return porttest.Free(t, addr)
}

// env is the environment that lets exabgp run in a temporary directory:
// no privilege drop (its default user "exabgp" could not write there), no
// CLI pipes (they live in /run/exabgp), no acknowledgement lines written
// back to the API processes, log on stdout, no PID file, and one command
// line from the API process handled per reactor loop at full speed.
func env(dir string) []string {
	return append(os.Environ(),
		"exabgp_daemon_user="+currentUser(),
		"exabgp_daemon_drop=false",
		"exabgp_daemon_daemonize=false",
		"exabgp_daemon_pid=",
		"exabgp_api_cli=false",
		"exabgp_api_ack=false",
		"exabgp_api_respawn=false",
		"exabgp_log_destination=stdout",
		"exabgp_log_level=INFO",
		"exabgp_cache_attributes=false",
		"exabgp_tcp_bind=", // listen per neighbor ("listen" in the config)
		"HOME="+dir,
	)
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// Start writes the configuration and starts exabgp; it is stopped at
// cleanup. It returns once the process runs; wait for sessions with
// Established or the peer's own view.
func Start(t testing.TB, o Options) *Speaker {
	t.Helper()
	bin := Binary(t)
	if o.RouterID == "" {
		o.RouterID = o.Address
	}
	if o.Port == 0 {
		o.Port = freePort(t, o.Address)
	}
	dir := t.TempDir()
	s := &Speaker{Options: o, Dir: dir, exited: make(chan struct{})}
	// The sender: ExaBGP reads API commands from the stdout of its
	// process, which copies them from a FIFO the test writes to. Opening
	// the FIFO read-write here never blocks and keeps it open, so the
	// process never sees an end of file.
	fifo := filepath.Join(dir, "commands.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	cmds, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open %s: %v", fifo, err)
	}
	s.cmds = cmds
	// A process whose stdout closes counts as dead to ExaBGP, so the
	// scripts keep theirs open: the receiver's cat writes to the file
	// while the shell holds stdout.
	sendScript := filepath.Join(dir, "send.sh")
	if err := os.WriteFile(sendScript, []byte(fmt.Sprintf("#!/bin/sh\nexec cat %q\n", fifo)), 0o755); err != nil {
		t.Fatal(err)
	}
	s.recv = filepath.Join(dir, "received.jsonl")
	recvScript := filepath.Join(dir, "recv.sh")
	if err := os.WriteFile(recvScript, []byte(fmt.Sprintf("#!/bin/sh\ncat >> %q\n", s.recv)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.recv, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "exabgp.conf")
	if err := os.WriteFile(conf, []byte(s.config(sendScript, recvScript)), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "exabgp.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, conf)
	s.cmd.Env = env(dir)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Its own process group, so that cleanup also ends the API processes.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start exabgp: %v", err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		cmds.Close()
		logf.Close()
		if t.Failed() {
			t.Logf("exabgp log (%s):\n%s", o.Address, s.LogTail(40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.LogTail(50), "loaded new configuration successfully") {
		select {
		case <-s.exited:
			t.Fatalf("exabgp on %s exited at start; log:\n%s", o.Address, s.LogTail(40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("exabgp on %s did not load its configuration within 30s; log:\n%s", o.Address, s.LogTail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func (s *Speaker) config(sendScript, recvScript string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "process send {\n  run %s;\n  encoder json;\n}\n", sendScript)
	if s.Receive {
		fmt.Fprintf(&b, "process recv {\n  run %s;\n  encoder json;\n}\n", recvScript)
	}
	for _, p := range s.Peers {
		fmt.Fprintf(&b, "neighbor %s {\n  router-id %s;\n  local-address %s;\n  local-as %d;\n  peer-as %d;\n",
			p.Address, s.RouterID, s.Address, s.ASN, p.ASN)
		fmt.Fprintf(&b, "  listen %d;\n  connect %d;\n  passive %t;\n  hold-time 30;\n", s.Port, p.Port, p.Passive)
		// Routes from the API go out in UPDATEs as they come (ExaBGP packs
		// no FlowSpec NLRIs together in 4.2 anyway).
		b.WriteString("  family {\n    ipv4 flow;\n    ipv6 flow;\n    ipv4 unicast;\n    ipv6 unicast;\n  }\n")
		if s.Receive {
			b.WriteString("  api recv {\n    processes [ recv ];\n    neighbor-changes;\n    receive {\n      parsed;\n      update;\n      notification;\n    }\n  }\n")
		}
		b.WriteString("  api send {\n    processes [ send ];\n  }\n")
		b.WriteString("}\n")
	}
	return b.String()
}

// Send hands API commands to ExaBGP, one a line, e.g.
// "announce flow route destination 10.0.0.1/32 protocol udp discard".
// ExaBGP logs commands it cannot parse (see LogTail).
func (s *Speaker) Send(commands ...string) error {
	var buf bytes.Buffer
	for _, c := range commands {
		buf.WriteString(c)
		buf.WriteByte('\n')
	}
	_, err := s.cmds.Write(buf.Bytes())
	return err
}

// LogTail returns the last n lines of exabgp's log.
func (s *Speaker) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "exabgp.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Pid is the exabgp process.
func (s *Speaker) Pid() int { return s.cmd.Process.Pid }

// ExtCommunity is one extended community as ExaBGP decodes it: the 8
// bytes as a number and ExaBGP's text ("" when it has no name for it).
type ExtCommunity struct {
	Value  uint64 `json:"value"`
	String string `json:"string"`
}

// Flow is one FlowSpec route ExaBGP holds from a peer.
type Flow struct {
	Family string // "ipv4 flow" or "ipv6 flow"
	// String is ExaBGP's own text of the NLRI, e.g. "flow
	// destination-ipv4 10.0.0.0/24 destination-port [ >=1024&<=2048 =80 ]".
	String string
	// Components maps ExaBGP's component names to its items.
	Components map[string][]string
	// ExtCommunities are the extended communities in received order.
	ExtCommunities []ExtCommunity
	// Attributes holds every other path attribute of the UPDATE as ExaBGP
	// printed it (IPv6 extended communities appear as
	// "attribute-0x19-0xC0").
	Attributes map[string]json.RawMessage
}

// Unicast is one unicast route ExaBGP holds from a peer.
type Unicast struct {
	Family      string // "ipv4 unicast" or "ipv6 unicast"
	Prefix      string
	NextHop     string
	Communities [][2]uint32
}

// Received is ExaBGP's current table from one peer and that session's
// history, replayed from the JSON messages in arrival order.
type Received struct {
	Flows   map[string]Flow    // keyed by Flow.String
	Unicast map[string]Unicast // keyed by prefix
	Ups     int                // times the session came up
	Downs   int                // times it went down
	Up      bool
	// Reasons are ExaBGP's texts for each time the session went down.
	Reasons []string
	// Notifications are NOTIFICATION messages received, "code/subcode".
	Notifications []string
}

type message struct {
	Type     string `json:"type"`
	Neighbor struct {
		Address struct {
			Peer string `json:"peer"`
		} `json:"address"`
		State   string `json:"state"`
		Reason  string `json:"reason"`
		Message struct {
			Update struct {
				Attribute map[string]json.RawMessage                         `json:"attribute"`
				Announce  map[string]map[string][]map[string]json.RawMessage `json:"announce"`
				Withdraw  map[string][]map[string]json.RawMessage            `json:"withdraw"`
			} `json:"update"`
		} `json:"message"`
		Notification struct {
			Code    int `json:"code"`
			Subcode int `json:"subcode"`
		} `json:"notification"`
	} `json:"neighbor"`
}

// Received replays the messages received from peer (its address).
func (s *Speaker) Received(peer string) (Received, error) {
	if !s.Receive {
		return Received{}, fmt.Errorf("exabgp on %s was started without Receive", s.Address)
	}
	data, err := os.ReadFile(s.recv)
	if err != nil {
		return Received{}, err
	}
	r := Received{Flows: map[string]Flow{}, Unicast: map[string]Unicast{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			// The last line may still be being written.
			continue
		}
		if m.Neighbor.Address.Peer != peer {
			continue
		}
		switch m.Type {
		case "state":
			switch m.Neighbor.State {
			case "up":
				r.Ups++
				r.Up = true
			case "down":
				r.Downs++
				r.Up = false
				r.Reasons = append(r.Reasons, m.Neighbor.Reason)
				// A session that goes down takes its routes with it.
				r.Flows, r.Unicast = map[string]Flow{}, map[string]Unicast{}
			}
		case "notification":
			r.Notifications = append(r.Notifications, fmt.Sprintf("%d/%d", m.Neighbor.Notification.Code, m.Neighbor.Notification.Subcode))
		case "update":
			if err := r.apply(m); err != nil {
				return r, err
			}
		}
	}
	return r, sc.Err()
}

func (r *Received) apply(m message) error {
	u := m.Neighbor.Message.Update
	var ext []ExtCommunity
	var comms [][2]uint32
	other := map[string]json.RawMessage{}
	for k, v := range u.Attribute {
		switch k {
		case "extended-community":
			if err := json.Unmarshal(v, &ext); err != nil {
				return fmt.Errorf("exabgp extended-community %s: %v", v, err)
			}
		case "community":
			if err := json.Unmarshal(v, &comms); err != nil {
				return fmt.Errorf("exabgp community %s: %v", v, err)
			}
		default:
			other[k] = v
		}
	}
	for fam, byNH := range u.Announce {
		for nh, nlris := range byNH {
			for _, n := range nlris {
				if strings.HasSuffix(fam, " flow") {
					f, err := flowOf(fam, n)
					if err != nil {
						return err
					}
					f.ExtCommunities, f.Attributes = ext, other
					r.Flows[f.String] = f
					continue
				}
				var prefix string
				json.Unmarshal(n["nlri"], &prefix)
				r.Unicast[prefix] = Unicast{Family: fam, Prefix: prefix, NextHop: nh, Communities: comms}
			}
		}
	}
	for fam, nlris := range u.Withdraw {
		for _, n := range nlris {
			if strings.HasSuffix(fam, " flow") {
				f, err := flowOf(fam, n)
				if err != nil {
					return err
				}
				delete(r.Flows, f.String)
				continue
			}
			var prefix string
			json.Unmarshal(n["nlri"], &prefix)
			delete(r.Unicast, prefix)
		}
	}
	return nil
}

func flowOf(fam string, n map[string]json.RawMessage) (Flow, error) {
	f := Flow{Family: fam, Components: map[string][]string{}}
	for k, v := range n {
		if k == "string" {
			if err := json.Unmarshal(v, &f.String); err != nil {
				return f, fmt.Errorf("exabgp flow string %s: %v", v, err)
			}
			continue
		}
		var items []string
		if err := json.Unmarshal(v, &items); err != nil {
			return f, fmt.Errorf("exabgp flow component %s %s: %v", k, v, err)
		}
		f.Components[k] = items
	}
	return f, nil
}

// WaitReceived polls what ExaBGP received from peer until cond holds or
// timeout passes, and returns the last state seen.
func (s *Speaker) WaitReceived(t testing.TB, peer string, timeout time.Duration, what string, cond func(Received) bool) Received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r, err := s.Received(peer)
		if err == nil && cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("ExaBGP on %s from %s: %s not reached within %v; it holds %d flows, %d unicast routes, session up %v after %d ups (err %v)",
				s.Address, peer, what, timeout, len(r.Flows), len(r.Unicast), r.Up, r.Ups, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
