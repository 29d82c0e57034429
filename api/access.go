package api

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// tcpAccess is who may use the TCP listener and how it is reached: its
// tokens, its own address, and the further names and web origins it
// answers. It is immutable; a reload replaces it whole (tcpState.swap).
type tcpAccess struct {
	tokens *tokenSet // nil: no tokens (a loopback listener)
	// anonymous ends the open requests of a listener without tokens once
	// it has some.
	anonymous *live
	self      hostPort // the configured listen address; zero in tests
	loopback  bool     // the configured address is loopback
	hosts     map[string]bool
	origins   map[string]bool
}

// live is the lifetime of one credential: a token as configured, or the
// anonymous access of a listener without tokens. Requests it authenticates
// run under its context, so that ending it ends them.
type live struct {
	ctx context.Context
	end context.CancelFunc
}

func newLive() *live {
	ctx, end := context.WithCancel(context.Background())
	return &live{ctx: ctx, end: end}
}

// TokenChanges is what SetTCPAccess changed, by token name.
type TokenChanges struct {
	Added   []string
	Removed []string
	// Changed tokens kept their name but not their secret (rotated),
	// role or scope: the old ones no longer work.
	Changed []string
}

// Empty reports whether no token changed.
func (c TokenChanges) Empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Changed) == 0
}

// tcpState holds the TCP listener's current access. Requests load it once
// each; swaps are serialised so that each one ends exactly the
// credentials the one before it left.
type tcpState struct {
	mu  sync.Mutex
	cur atomic.Pointer[tcpAccess]
}

// denyAll is the access of a listener not yet set up: no token is known.
var denyAll = &tcpAccess{tokens: &tokenSet{}}

func (st *tcpState) load() *tcpAccess {
	if a := st.cur.Load(); a != nil {
		return a
	}
	return denyAll
}

// install sets the listener's first access, unless a reload already gave
// it a newer one (a SIGHUP can come before the listener starts).
func (st *tcpState) install(first *tcpAccess) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cur.Load() == nil {
		st.cur.Store(first)
	}
}

// swap installs next and then ends the credentials it dropped: a request
// that looked one up just before is still ended, since its context is
// tied to the credential, not to the lookup.
func (st *tcpState) swap(next *tcpAccess) TokenChanges {
	st.mu.Lock()
	defer st.mu.Unlock()
	prev := st.cur.Load()
	if prev == nil {
		prev = &tcpAccess{}
	}
	ch, ended := next.carryOver(prev)
	st.cur.Store(next)
	for _, l := range ended {
		l.end()
	}
	return ch
}

// carryOver keeps, in a (not yet published), prev's live tokens that did
// not change, so that their open requests go on; it returns what changed
// and the credentials to end.
func (a *tcpAccess) carryOver(prev *tcpAccess) (TokenChanges, []*live) {
	var (
		ch    TokenChanges
		ended []*live
	)
	old := map[string]*hashedToken{}
	if prev.tokens != nil {
		for _, t := range prev.tokens.tokens {
			old[t.id.name] = t
		}
	}
	if a.tokens != nil {
		for i, t := range a.tokens.tokens {
			p, ok := old[t.id.name]
			switch {
			case !ok:
				ch.Added = append(ch.Added, t.id.name)
				continue
			case p.sameAs(t):
				a.tokens.tokens[i] = p
			default:
				ch.Changed = append(ch.Changed, t.id.name)
				ended = append(ended, p.live)
			}
			delete(old, t.id.name)
		}
	}
	if prev.tokens != nil {
		for _, p := range prev.tokens.tokens {
			if _, gone := old[p.id.name]; gone {
				ch.Removed = append(ch.Removed, p.id.name)
				ended = append(ended, p.live)
			}
		}
	}
	switch {
	case prev.anonymous == nil:
	case a.anonymous != nil:
		a.anonymous = prev.anonymous
	default:
		ended = append(ended, prev.anonymous)
	}
	return ch, ended
}

// sameAs reports whether t is the same credential as h: same secret, and
// the same role and scope.
func (h *hashedToken) sameAs(t *hashedToken) bool {
	x, y := h.id, t.id
	return h.digest == t.digest && x.name == y.name && x.role == y.role && x.maxActive == y.maxActive &&
		x.maxNewPerMinute == y.maxNewPerMinute && x.neverExpires == y.neverExpires && x.othersRules == y.othersRules &&
		slices.Equal(x.prefixes, y.prefixes) && slices.Equal(x.actions, y.actions)
}
