package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Preload is the daemon's start-up read of the desired state (the walk
// that also seeds the first pass, Seed) handing the table to the speaker
// as it streams from the store: each rule the first pass would plainly
// announce (active, neither withdrawn nor expired, valid) goes to the
// speaker in batches while the walk goes on, so reading the table and
// loading GoBGP's RIB overlap instead of following each other. The first
// pass then finds those paths in the RIB and adopts them.
//
// It is for the start only, before Run: the RIB holds nothing of ours
// then (no orphan to keep), nothing is announced early yet, and whatever
// the walk announces is a stored, active rule. The caller keeps back the
// rules that must not be announced before it has acted on them (those
// breaking a guardrail: Add with announce false). If the walk fails, what
// was announced stays, as desired rules do when the store cannot be read
// (unknown is never empty), and the next complete read decides. Nothing
// is announced in a dry run, nor while the speaker's mirror is not
// initialised (nothing blind).
type Preload struct {
	r     *Reconciler
	ctx   context.Context
	rows  Rows
	on    bool
	batch []flowspec.Rule
	out   chan []flowspec.Rule
	done  chan struct{}
	// sent and failed count the rules handed to the speaker and those
	// it refused (the first pass retries and reports them); written by
	// the announcing goroutines, read after done.
	sent, failed int
}

// preloadQueue bounds the batches waiting for the speaker: when GoBGP is
// slower than the walk, the walk waits rather than queue the table.
const preloadQueue = 4

// Preload starts a start-up read that hands rules to the speaker as they
// come (see Preload). Finish ends it; Seed takes its rows.
func (r *Reconciler) Preload(ctx context.Context) *Preload {
	p := &Preload{r: r, ctx: ctx}
	if r.cfg.DryRun || r.s == nil {
		return p
	}
	if _, _, ok := r.s.Path(flowspec.Match{}); !ok {
		return p // the mirror cannot show what is in the RIB yet
	}
	p.on = true
	p.out = make(chan []flowspec.Rule, preloadQueue)
	p.done = make(chan struct{})
	// As announceAll: announceParallel calls in flight, so that GoBGP's
	// loop has the next batch while the speaker prepares another.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range announceParallel {
		wg.Go(func() {
			for b := range p.out {
				if ctx.Err() != nil {
					continue // drain: Finish is waiting
				}
				failed := 0
				for _, err := range r.s.Announce(ctx, b) {
					if err != nil {
						failed++
					}
				}
				mu.Lock()
				p.sent += len(b)
				p.failed += failed
				mu.Unlock()
			}
		})
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return p
}

// Add compacts rule into the read, as Rows.Add does, and hands it to the
// speaker if announce is set and the first pass would announce it.
func (p *Preload) Add(rule *store.Rule, announce bool) {
	p.rows.Add(rule)
	if !announce || !p.on {
		return
	}
	c := &p.rows.rows[len(p.rows.rows)-1]
	if _, retiring := c.retiring(p.r.now()); retiring || c.final() || c.validate() != nil {
		return
	}
	if p.batch == nil {
		p.batch = make([]flowspec.Rule, 0, announceBatch)
	}
	p.batch = append(p.batch, rule.Rule)
	if len(p.batch) == announceBatch {
		p.flush()
	}
}

func (p *Preload) flush() {
	if len(p.batch) == 0 {
		return
	}
	select {
	case p.out <- p.batch:
	case <-p.ctx.Done():
	}
	p.batch = nil
}

// preloadIdle is how long Finish waits for the mirror to show one more
// change before it leaves the rest to the first pass.
const preloadIdle = time.Second

// Finish hands over the last batch, waits until the speaker took every
// batch and, while its mirror keeps catching up (a change at least every
// preloadIdle), until the mirror shows them, so that the first pass
// adopts them rather than announce them again. It returns the rows read,
// for Seed, and how many rules the speaker took.
func (p *Preload) Finish() (rows *Rows, announced int) {
	if !p.on {
		return &p.rows, 0
	}
	p.flush()
	close(p.out)
	p.on = false
	<-p.done
	announced = p.sent - p.failed
	idle := p.r.clock.NewTimer()
	defer idle.Stop()
	for p.r.s.Len() < announced {
		idle.Reset(preloadIdle)
		select {
		case <-p.r.s.Changes():
		case <-idle.C():
			return &p.rows, announced
		case <-p.ctx.Done():
			return &p.rows, announced
		}
	}
	return &p.rows, announced
}
