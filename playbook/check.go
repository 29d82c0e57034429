package playbook

import (
	"fmt"
	"net/netip"

	"github.com/ribkeeper/ribkeeper/config"
)

// Check refuses the playbooks of cfg whose rules would fall outside the
// scope of a source they take signals from: each template is rendered
// for a target in each of the playbook's prefixes (else in the source's
// first prefix) and checked against the source's actor exactly as the
// admission gate checks a write (admit.Actor.CheckScope: prefixes and
// actions). A playbook's prefix outside a scoped source's is refused too.
// Each problem is an error of the file, with the key and line of the
// step's rules.
func Check(cfg *config.Config) config.Errors {
	var es config.Errors
	for i, p := range cfg.Playbooks {
		for _, src := range sourcesOf(cfg, p) {
			actor := Actor(src)
			targets := p.Prefixes
			if len(targets) == 0 {
				targets = []netip.Prefix{{}}
				if len(src.Prefixes) > 0 {
					targets = src.Prefixes[:1]
				}
			}
			for k, pfx := range p.Prefixes {
				if len(src.Prefixes) > 0 && !actor.Scope.Covers(pfx) {
					es = append(es, cfg.Problem(fmt.Sprintf("playbook.%d.prefixes", i),
						"entry %d, %s, is outside the prefixes of source %q: the gate would refuse every rule for it; narrow the playbook's prefixes, or widen the [[source]]'s",
						k+1, pfx, src.Name))
				}
			}
			for j, st := range p.Steps {
				for k, t := range st.Rules {
					for _, target := range targets {
						text, r, err := t.Render(p.Example(target))
						if err != nil {
							continue // config reported it
						}
						if err := actor.CheckScope(r); err != nil {
							es = append(es, cfg.Problem(fmt.Sprintf("playbook.%d.step.%d", i, j),
								"rules entry %d, %q, is outside the scope of source %q (e.g. %q): %v", k+1, t.Text, src.Name, text, err))
							break
						}
					}
				}
			}
		}
	}
	return es
}

// sourcesOf returns the sources p takes signals from.
func sourcesOf(cfg *config.Config, p config.Playbook) []config.Source {
	if len(p.Sources) == 0 {
		return cfg.Sources
	}
	var out []config.Source
	for _, s := range cfg.Sources {
		for _, n := range p.Sources {
			if s.Name == n {
				out = append(out, s)
			}
		}
	}
	return out
}
