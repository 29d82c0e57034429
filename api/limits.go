package api

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Bounds on what clients of the TCP listener can make the daemon hold
// open: connections, and event streams per token and in total. They keep
// file descriptors for the control socket, the BGP sessions and the
// database whatever the TCP side does: a connection the limits refuse is
// closed at once.
//
// The defaults derive from the process's open-file limit (RLIMIT_NOFILE,
// whose soft value Go raises to the hard one at start): half of what is
// left after a reserve of fdReserve goes to TCP connections, half of
// those to event streams.

// CodeTooManyStreams is the code of a 429 answer to GET /v1/events: the
// token, or the listener, has as many event streams open as its limit
// allows. The message names the limit and the setting that changes it.
const CodeTooManyStreams = "too_many_streams"

// DefaultStreamsPerToken is how many event streams one token (one actor)
// may have open at once ([api] max_event_streams_per_token): a console
// tab holds one.
const DefaultStreamsPerToken = 8

// DefaultMaxStreams and DefaultMaxConnections are the limits used when
// the open-file limit cannot be read.
const (
	DefaultMaxStreams     = 64
	DefaultMaxConnections = 128
)

// fdReserve is the file descriptors kept for everything but the TCP
// listener's connections (the control socket and its clients, BGP
// sessions, the database and its journal, logs).
const fdReserve = 128

// Caps of the derived defaults: beyond them more connections or streams
// cost memory without serving anyone better.
const (
	maxDerivedConnections = 4096
	maxDerivedStreams     = 1024
)

// Limits are the TCP listener's bounds: connections, and event streams.
type Limits struct {
	// MaxConnections caps the TCP listener's open connections.
	MaxConnections int
	// Streams caps the event streams.
	Streams StreamLimits
	// NoFile is the open-file limit the defaults were derived from (0:
	// not known).
	NoFile uint64
}

// StreamLimits caps the event streams (GET /v1/events).
type StreamLimits struct {
	// PerToken caps the streams of one token (one actor): a read token
	// must not be able to take every descriptor.
	PerToken int
	// Total caps the streams of the TCP listener; the control socket's
	// streams count apart, against the same number, so that it keeps
	// working whatever the TCP side does.
	Total int
	// NoFile, if known, is the open-file limit Total derives from; the
	// refusal names it.
	NoFile uint64
}

// DeriveLimits returns the default limits for a process whose open-file
// limit is nofile (0: unknown, the fixed defaults): MaxConnections is
// half of what remains after fdReserve (at least 16, at most 4096) and
// Streams.Total half of MaxConnections (at least 4, at most 1024).
func DeriveLimits(nofile uint64) Limits {
	l := Limits{MaxConnections: DefaultMaxConnections, NoFile: nofile,
		Streams: StreamLimits{PerToken: DefaultStreamsPerToken, Total: DefaultMaxStreams, NoFile: nofile}}
	if nofile == 0 {
		return l
	}
	free := 0
	if nofile > fdReserve {
		free = int(min(nofile-fdReserve, 1<<20))
	}
	l.MaxConnections = min(max(free/2, 16), maxDerivedConnections)
	l.Streams.Total = min(max(l.MaxConnections/2, 4), maxDerivedStreams)
	return l
}

// OpenFileLimit is the process's soft open-file limit (0 when it cannot
// be read).
func OpenFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// WithStreamLimits caps the event streams (zero fields keep the
// defaults: DefaultStreamsPerToken, DefaultMaxStreams).
func WithStreamLimits(l StreamLimits) EventsOption {
	return func(e *Events) {
		if l.PerToken > 0 {
			e.limits.PerToken = l.PerToken
		}
		if l.Total > 0 {
			e.limits.Total = l.Total
		}
		e.limits.NoFile = l.NoFile
	}
}

// streamOwner is whose stream it is: a token's name (or "tcp" for a
// listener without tokens) on TCP; the control socket's streams count
// apart.
type streamOwner struct {
	actor  string
	socket bool
}

type listenerKey struct{}

// ownerOf is the owner of a stream requested by r.
func ownerOf(r *http.Request) streamOwner {
	tcp, _ := r.Context().Value(listenerKey{}).(bool)
	return streamOwner{actor: actor(r), socket: !tcp}
}

// viaTCP marks requests as made over the TCP listener.
func viaTCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), listenerKey{}, true)))
	})
}

// streamCount counts open streams per owner and in total, per side.
type streamCount struct {
	byActor map[string]int // TCP streams per actor
	tcp     int
	socket  int
	// moved gets a wake-up (one slot) whenever a stream opens or closes,
	// for whoever waits for the counts to change.
	moved chan struct{}
}

// wake signals moved without waiting.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add counts a new stream of who, or says which limit refuses it.
func (c *streamCount) add(who streamOwner, l StreamLimits) *Error {
	if who.socket {
		if c.socket >= l.Total {
			return newError(http.StatusTooManyRequests, CodeTooManyStreams, "",
				"the control socket has %d event streams open, the most [api] max_event_streams allows: close one, or raise max_event_streams", c.socket)
		}
		c.socket++
		wake(c.moved)
		return nil
	}
	if n := c.byActor[who.actor]; n >= l.PerToken {
		return newError(http.StatusTooManyRequests, CodeTooManyStreams, "",
			"token %q has %d event streams open, the most [api] max_event_streams_per_token allows: close one (a console tab holds one), or raise max_event_streams_per_token",
			who.actor, n)
	}
	if c.tcp >= l.Total {
		from := ""
		if l.NoFile > 0 {
			from = " (by default derived from the open-file limit, here " + strconv.FormatUint(l.NoFile, 10) + ")"
		}
		return newError(http.StatusTooManyRequests, CodeTooManyStreams, "",
			"the TCP listener has %d event streams open, the most [api] max_event_streams%s allows: close some, or raise max_event_streams (and the open-file limit, e.g. LimitNOFILE= in the systemd unit)",
			c.tcp, from)
	}
	c.byActor[who.actor]++
	c.tcp++
	wake(c.moved)
	return nil
}

func (c *streamCount) remove(who streamOwner) {
	defer wake(c.moved)
	if who.socket {
		c.socket--
		return
	}
	c.tcp--
	if c.byActor[who.actor]--; c.byActor[who.actor] <= 0 {
		delete(c.byActor, who.actor)
	}
}

// limitListener accepts at most max connections at once; one more is
// closed at once, so that the descriptors beyond the limit stay with the
// rest of the daemon.
type limitListener struct {
	net.Listener
	log  hclog.Logger
	max  int
	mu   sync.Mutex
	open int
	// moved gets a wake-up (one slot) whenever a connection closes.
	moved chan struct{}
	// warned is when a refusal was last logged (at most one a minute).
	warned time.Time
}

func newLimitListener(ln net.Listener, max int, log hclog.Logger) *limitListener {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &limitListener{Listener: ln, max: max, log: log, moved: make(chan struct{}, 1)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return &limitedConn{Conn: c, l: l}, nil
		}
		warn := time.Since(l.warned) >= time.Minute
		if warn {
			l.warned = time.Now()
		}
		l.mu.Unlock()
		c.Close()
		if warn {
			l.log.Warn("TCP API connection refused: the listener has as many connections open as [api] max_connections allows; raise it (and the open-file limit), or find the client holding them",
				"max_connections", l.max, "remote", c.RemoteAddr().String())
		}
	}
}

// Open is how many connections are open.
func (l *limitListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
		wake(c.l.moved)
	})
	return err
}
