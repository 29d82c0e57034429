package admit

import (
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// TTLNever is the TTL that asks for a rule that never expires.
const TTLNever = "never"

// Request is one rule a client asks to store, as it sent it. Absent
// fields (nil) are kept as stored when the rule already exists; a new
// rule gets the defaults (the guardrails' default TTL, no reason, every
// site).
type Request struct {
	Text   string
	TTL    *string // a duration ("30m", "1h30m", "2d") or TTLNever
	Reason *string
	Sites  *[]string // empty: every site
	// AllowUnknownSites lets Sites name sites that no instance registered
	// yet.
	AllowUnknownSites bool
}

// Limits bound what one request may ask of the gate: [limits] of the
// configuration, as plain values; zero fields take the defaults below.
type Limits = config.Limits

// The default limits.
const (
	DefaultMaxBatchRules           = 10000
	DefaultMaxSitesPerRule         = 32
	DefaultMaxSiteNameBytes        = 64
	DefaultMaxTextBytes            = 4096
	DefaultScopedNewRulesPerMinute = 120
	DefaultMaxSetRules             = 1000000
	DefaultMaxSetBodyBytes         = 128 << 20
)

// withDefaults fills the zero fields of l.
func withDefaults(l Limits) Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxBatchRules, DefaultMaxBatchRules)
	def(&l.MaxSitesPerRule, DefaultMaxSitesPerRule)
	def(&l.MaxSiteNameBytes, DefaultMaxSiteNameBytes)
	def(&l.MaxTextBytes, DefaultMaxTextBytes)
	def(&l.ScopedNewRulesPerMinute, DefaultScopedNewRulesPerMinute)
	def(&l.MaxSetRules, DefaultMaxSetRules)
	def(&l.MaxSetBodyBytes, DefaultMaxSetBodyBytes)
	return l
}

// parsed is a Request that passed the input bounds and parsed: what the
// store is to hold, before the guardrails decide its expiry.
type parsed struct {
	in store.Input
	// ttl is the TTL asked for; zero with ttlGiven && never for "never".
	ttl      time.Duration
	ttlGiven bool
	never    bool
}

// parse checks req against the bounds l and parses its text; index is its
// position in a batch (-1: none).
// parseSpread is the batch size from which parseAll parses on every CPU.
const parseSpread = 1024

// parseAll parses a batch as parse does each of its requests, on every
// CPU for a large batch (parsing is a third of a large batch's work
// outside the store), and refuses it for its first bad request, as a
// parse in order would.
func (g *Gate) parseAll(reqs []Request, l Limits, actor string) ([]parsed, *Refusal) {
	ps := make([]parsed, len(reqs))
	workers := min(runtime.GOMAXPROCS(0), (len(reqs)+parseSpread-1)/parseSpread)
	if workers <= 1 {
		for i, req := range reqs {
			p, ref := g.parse(req, i, l, actor)
			if ref != nil {
				return nil, ref
			}
			ps[i] = p
		}
		return ps, nil
	}
	refs := make([]*Refusal, workers)
	var wg sync.WaitGroup
	per := (len(reqs) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, len(reqs))
		wg.Go(func() {
			i := lo
			defer func() {
				// The HTTP server recovers a handler's panic, not a
				// worker's: a text that panics the parser is refused.
				if v := recover(); v != nil {
					refs[w] = refuse(KindInvalidRule, i, "text", "rule text could not be parsed (%v): report it with the rule text", v)
				}
			}()
			for ; i < hi; i++ {
				p, ref := g.parse(reqs[i], i, l, actor)
				if ref != nil {
					refs[w] = ref // the first of this worker's part
					return
				}
				ps[i] = p
			}
		})
	}
	wg.Wait()
	for _, ref := range refs {
		if ref != nil {
			return nil, ref // parts are in order: the batch's first
		}
	}
	return ps, nil
}

func (g *Gate) parse(req Request, index int, l Limits, actor string) (parsed, *Refusal) {
	text := strings.TrimSpace(req.Text)
	switch {
	case text == "":
		return parsed{}, refuse(KindInvalidRule, index, "text", `text is required, e.g. "match destination 203.0.113.7/32 then discard"`)
	case len(text) > l.MaxTextBytes:
		return parsed{}, refuse(KindInvalidRule, index, "text",
			"rule text is %d bytes, longer than the %d allowed ([limits] max_text_bytes): a rule that long is a mistake; shorten it",
			len(text), l.MaxTextBytes)
	}
	rule, err := flowspec.Parse(text)
	if err != nil {
		return parsed{}, &Refusal{Kind: KindInvalidRule, Index: index, Field: "text", Msg: ruleTextMsg(err), Err: err}
	}
	if !rule.IsValid() {
		return parsed{}, refuse(KindInvalidRule, index, "text", "rule text: incomplete rule")
	}
	if g.cfg.Sendable != nil {
		if err := g.cfg.Sendable(rule.Match); err != nil {
			return parsed{}, &Refusal{Kind: KindUnsendable, Index: index, Field: "text", Msg: oneLine(err.Error()), Err: err}
		}
	}
	p := parsed{in: store.Input{Rule: rule, Actor: actor, AllowUnknownSites: req.AllowUnknownSites}}
	if req.TTL == nil {
		p.in.Keep |= store.KeepExpiry
	} else {
		p.ttlGiven = true
		switch ttl := strings.TrimSpace(*req.TTL); ttl {
		case TTLNever:
			p.never = true
		default:
			d, err := ParseTTL(ttl)
			if err != nil {
				return parsed{}, refuse(KindInvalidTTL, index, "ttl", "ttl %q: %v", *req.TTL, err)
			}
			p.ttl = d
		}
	}
	if req.Reason == nil {
		p.in.Keep |= store.KeepReason
	} else {
		p.in.Reason = *req.Reason
		if err := store.CheckText(p.in.Reason, store.MaxReasonBytes); err != nil {
			return parsed{}, refuse(KindInvalidInput, index, "reason", "reason: %v", err)
		}
	}
	if req.Sites == nil {
		p.in.Keep |= store.KeepSites
	} else {
		sites := *req.Sites
		if len(sites) > l.MaxSitesPerRule {
			return parsed{}, refuse(KindInvalidInput, index, "sites",
				"%d sites, more than the %d a rule may name ([limits] max_sites_per_rule): name fewer, or none for every site",
				len(sites), l.MaxSitesPerRule)
		}
		for i, s := range sites {
			if len(s) > l.MaxSiteNameBytes {
				return parsed{}, refuse(KindInvalidInput, index, "sites",
					"site %d is %d bytes, longer than the %d allowed ([limits] max_site_name_bytes): use the site's configured name",
					i, len(s), l.MaxSiteNameBytes)
			}
		}
		p.in.Sites = sites
	}
	return p, nil
}

// ParseTTL reads a TTL: a Go duration ("90s", "30m", "1h30m") or a whole
// number of days ("2d"), positive.
func ParseTTL(s string) (time.Duration, error) {
	var (
		d   time.Duration
		err error
	)
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		if len(n) > 5 {
			return 0, errTTL
		}
		days := 0
		for _, c := range n {
			days = days*10 + int(c-'0')
		}
		d = time.Duration(days) * 24 * time.Hour
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, errTTL
	}
	if d <= 0 {
		return 0, errTTLPositive
	}
	return d, nil
}

type ttlError string

func (e ttlError) Error() string { return string(e) }

const (
	errTTL         = ttlError(`not a duration such as "10m", "1h30m" or "2d" (or "never")`)
	errTTLPositive = ttlError("a TTL must be positive: give one such as 30m")
)

// oneLine keeps a message on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// ruleTextMsg is the message of a rule text that does not parse.
func ruleTextMsg(err error) string {
	msg := oneLine(err.Error())
	if strings.HasPrefix(msg, "rule text") {
		return msg
	}
	return "rule text: " + msg
}
