package main

import (
	"fmt"
	"io"
	"strings"
)

// A target is one figure of the issues' "Benchmarks" sections (issue 10,
// the GoBGP v4 speaker, and the standing ones of issue 5), computed from
// the results of the same run and compared with its goal.
type target struct {
	what string // the figure
	goal string // the goal, as the issue states it
	// eval returns the figure as text and whether it meets the goal; ok is
	// false when the run lacks the results it needs.
	eval func(g getter) (figure string, met, ok bool)
}

// getter looks a metric up by benchmark name (without package and -procs).
type getter func(name, unit string) (float64, bool)

// num is the metric unit of benchmark name as a figure ("0" when the run
// has none).
func (g getter) num(name, unit string) string {
	v, _ := g(name, unit)
	return num(v)
}

func ratio(num, den, unit string, good func(float64) bool, format string) func(getter) (string, bool, bool) {
	return func(g getter) (string, bool, bool) {
		a, ok1 := g(num, unit)
		b, ok2 := g(den, unit)
		if !ok1 || !ok2 || b == 0 {
			return "", false, false
		}
		r := a / b
		return fmt.Sprintf(format, r, num, num2(a), den, num2(b), unit), good(r), true
	}
}

func below(name, unit string, limit float64) func(getter) (string, bool, bool) {
	return func(g getter) (string, bool, bool) {
		v, ok := g(name, unit)
		if !ok {
			return "", false, false
		}
		return fmt.Sprintf("%s %s (%s)", num2(v), unit, name), v < limit, true
	}
}

func num2(v float64) string { return num(v) }

var targets = []target{
	{
		what: "Bulk: API → BIRD rate, ribkeeper ÷ raw GoBGP v4 (batched AddPath)",
		goal: "≥ 0.8×",
		eval: func(g getter) (string, bool, bool) { return bulkRounds(g, 0.8) },
	},
	{
		what: "Restart with graceful restart: BIRD's smallest table during a kill -9 restart, % of N",
		goal: "100 % (zero gap)",
		eval: func(g getter) (string, bool, bool) {
			v, ok := g("BenchmarkRestartGR", "min-pct")
			if !ok {
				return "", false, false
			}
			n, _ := g("BenchmarkRestartGR", "rules")
			back, _ := g("BenchmarkRestartGR", "back-s")
			swept, _ := g("BenchmarkRestartGR", "swept-s")
			gap, _ := g("BenchmarkRestartGR", "gap-max-ms")
			return fmt.Sprintf("%s %% at %s rules (session back after %s s, expired rule swept after %s s; BIRD read at most %s ms apart)",
				num(v), num(n), num(back), num(swept), num(gap)), v >= 100, true
		},
	},
	{
		what: "Restart without graceful restart: exec → BIRD full, ÷ raw GoBGP v4's initial sync",
		goal: "≤ 1.2×",
		eval: ratio("BenchmarkRestart/ours", "BenchmarkRestart/gobgp", "s",
			func(r float64) bool { return r <= 1.2 }, "%.2f× (%s %s vs %s %s %s)"),
	},
	{
		what: "Time to mitigate: one POST /v1/rules → UPDATE at a peer, p50 and p99, ÷ ExaBGP's API → peer",
		goal: "≤ 1× at p50 and p99",
		eval: func(g getter) (string, bool, bool) {
			o50, ok1 := g("BenchmarkTimeToMitigate/ours", "p50-ms")
			o99, ok2 := g("BenchmarkTimeToMitigate/ours", "p99-ms")
			e50, ok3 := g("BenchmarkTimeToMitigate/exabgp", "p50-ms")
			e99, ok4 := g("BenchmarkTimeToMitigate/exabgp", "p99-ms")
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return "", false, false
			}
			ack, _ := g("BenchmarkTimeToMitigate/ours", "ack-p50-ms")
			return fmt.Sprintf("ribkeeper p50 %s / p99 %s ms, ExaBGP p50 %s / p99 %s ms%s (ribkeeper's acknowledgement, after the durable commit: p50 %s ms)",
				num(o50), num(o99), num(e50), num(e99), roundSpread(g, "BenchmarkTimeToMitigate"), num(ack)), o50 <= e50 && o99 <= e99, true
		},
	},
	{
		what: "Signal → UPDATE at a peer: a signed webhook signal opening an incident whose playbook makes the rule, p50 and p99, next to a single POST /v1/rules in the same daemon and run",
		goal: "within 1.5× of the single POST's p50 and p99 (the signal path adds no latency of its own)",
		eval: func(g getter) (string, bool, bool) {
			s50, ok1 := g("BenchmarkSignalToUpdate", "p50-ms")
			s99, ok2 := g("BenchmarkSignalToUpdate", "p99-ms")
			p50, ok3 := g("BenchmarkSignalToUpdate", "post-p50-ms")
			p99, ok4 := g("BenchmarkSignalToUpdate", "post-p99-ms")
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return "", false, false
			}
			fig := fmt.Sprintf("signal p50 %s / p99 %s ms, POST /v1/rules p50 %s / p99 %s ms", num(s50), num(s99), num(p50), num(p99))
			if n, ok := g("BenchmarkSignalToUpdate", "rounds"); ok {
				lo, _ := g("BenchmarkSignalToUpdate", "p99-lo-ms")
				hi, _ := g("BenchmarkSignalToUpdate", "p99-hi-ms")
				plo, _ := g("BenchmarkSignalToUpdate", "post-p99-lo-ms")
				phi, _ := g("BenchmarkSignalToUpdate", "post-p99-hi-ms")
				fig += fmt.Sprintf(", all of %.0f rounds of 200 pooled, in turn; the rounds' own p99: signal %s–%s ms, POST %s–%s ms", n, num(lo), num(hi), num(plo), num(phi))
			}
			return fig,
				s50 <= 1.5*p50 && s99 <= 1.5*p99, true
		},
	},
	{
		what: "Time to withdraw: one DELETE /v1/rules/{id} → withdrawing UPDATE at a peer, p50 and p99, ÷ ExaBGP's API → peer",
		goal: "≤ 1× at p50 and p99",
		eval: func(g getter) (string, bool, bool) {
			o50, ok1 := g("BenchmarkTimeToWithdraw/ours", "p50-ms")
			o99, ok2 := g("BenchmarkTimeToWithdraw/ours", "p99-ms")
			e50, ok3 := g("BenchmarkTimeToWithdraw/exabgp", "p50-ms")
			e99, ok4 := g("BenchmarkTimeToWithdraw/exabgp", "p99-ms")
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return "", false, false
			}
			ack, _ := g("BenchmarkTimeToWithdraw/ours", "ack-p50-ms")
			return fmt.Sprintf("ribkeeper p50 %s / p99 %s ms, ExaBGP p50 %s / p99 %s ms%s (ribkeeper's acknowledgement, after the durable commit: p50 %s ms)",
				num(o50), num(o99), num(e50), num(e99), roundSpread(g, "BenchmarkTimeToWithdraw"), num(ack)), o50 <= e50 && o99 <= e99, true
		},
	},
	{
		what: "Durable batch writes through POST /v1/rules/batch (1,000 new rules a request, answered with their ids (Prefer: return=minimal) after the commit): one client, and four at once; PostgreSQL beside",
		goal: "≥ 50,000 rules/s on SQLite",
		eval: func(g getter) (string, bool, bool) {
			one, ok1 := g("BenchmarkAPIWriteBatch/sqlite", "rules/s")
			four, ok2 := g("BenchmarkAPIWriteBatchLoaded/sqlite", "rules/s")
			if !ok1 && !ok2 {
				return "", false, false
			}
			fig := fmt.Sprintf("SQLite: one client %s, four clients %s rules/s", num(one), num(four))
			pg1, okp1 := g("BenchmarkAPIWriteBatch/postgres", "rules/s")
			pg4, okp4 := g("BenchmarkAPIWriteBatchLoaded/postgres", "rules/s")
			if okp1 || okp4 {
				fig += fmt.Sprintf("; PostgreSQL: one client %s, four clients %s rules/s", num(pg1), num(pg4))
			}
			return fig, max(one, four) >= 50_000, true
		},
	},
	{
		what: "Full resync pass, nothing to change (daemon loop, periodic pass, p50)",
		goal: "< 100 ms, no ListPath",
		eval: func(g getter) (string, bool, bool) {
			v, ok := g("BenchmarkResyncPass", "pass-p50-ms")
			if !ok {
				return "", false, false
			}
			w, _ := g("BenchmarkResyncPass", "rib-writes")
			n, _ := g("BenchmarkResyncPass", "rules")
			return fmt.Sprintf("%s ms at %s rules, %s RIB writes; RIB read from the mirror only", num(v), num(n), num(w)), v < 100 && w == 0, true
		},
	},
	{
		what: "Full resync pass at 100k (reconcile.BenchmarkFullPass100k)",
		goal: "< 100 ms",
		eval: nsBelow("BenchmarkFullPass100k", 100),
	},
	{
		what: "Converged pass at 100k (reconcile.BenchmarkConvergedPass100k)",
		goal: "< 100 ms",
		eval: nsBelow("BenchmarkConvergedPass100k", 100),
	},
	{
		what: "Drift repair: withdrawn behind our back → back in the RIB, p99",
		goal: "< 50 ms",
		eval: below("BenchmarkDriftRepair", "p99-ms", 50),
	},
	{
		what: "Expiry lateness: expires_at → path gone from the RIB, p99",
		goal: "< 50 ms",
		eval: below("BenchmarkExpiryLateness", "p99-ms", 50),
	},
	{
		what: "Memory: settled RSS per rule, ribkeeper ÷ raw GoBGP v4",
		goal: "≤ 1.5×",
		eval: func(g getter) (string, bool, bool) {
			o, ok1 := g("BenchmarkBulk/ours", "B-rss/path")
			r, ok2 := g("BenchmarkBulk/gobgp", "B-rss/path")
			if !ok1 || !ok2 || r == 0 {
				return "", false, false
			}
			out := fmt.Sprintf("%.2f× settled (ribkeeper %s B/rule, GoBGP %s B/rule)", o/r, num(o), num(r))
			if o3, ok := g("BenchmarkBulk/ours", "B-rss-3s/path"); ok {
				if r3, ok := g("BenchmarkBulk/gobgp", "B-rss-3s/path"); ok && r3 > 0 {
					out += fmt.Sprintf("; 3 s after the load %.2f× (%s vs %s B/rule)", o3/r3, num(o3), num(r3))
				}
			}
			if e, ok := g("BenchmarkBulk/exabgp", "B-rss/path"); ok {
				out += fmt.Sprintf("; ExaBGP %s B/rule", num(e))
			}
			return out, o <= 1.5*r, true
		},
	},
	{
		what: "Memory after churn: distinct rules churned through a 10k live set",
		goal: "bounded: what the process keeps does not grow with the rules churned: the lowest live heap after a GC in the churn's last 3/8 no higher than in the 3/8 before (+15 %, at least 16 MiB; the first quarter is warm-up); GoBGP v4.8.0 keeps a table entry per NLRI (raw GoBGP fails this), ribkeeper compacts",
		eval: churnBounded,
	},
	{
		what: "Signals: sustained signals/s with correlation and playbooks on (1,000 ongoing attacks; playbook.BenchmarkSignals)",
		goal: "≥ 20,000/s (prefixd documents ~4,700 events/s)",
		eval: func(g getter) (string, bool, bool) {
			v, ok := g("BenchmarkSignals/ongoing-1000", "signals/s")
			if !ok {
				return "", false, false
			}
			s := num(v) + " signals/s"
			if o, ok := g("BenchmarkSignals/opening", "signals/s"); ok {
				s += fmt.Sprintf("; a new incident (rule stored through the gate) per signal: %s/s", num(o))
			}
			return s, v >= 20000, true
		},
	},
	{
		what: "Sets: an RTBH set applied through PUT /v1/sets/{name} to a BIRD peer, then re-applied with 1 % of its lines changed, then unchanged",
		goal: "only the difference on the wire: replacing 1 % of the lines withdraws 1 % and announces 1 % of the routes (2 % of the first apply's route updates), the unchanged apply sends nothing",
		eval: func(g getter) (string, bool, bool) {
			const b = "BenchmarkSets"
			routes, ok := g(b, "apply2-route-changes-%")
			if !ok {
				return "", false, false
			}
			pct, _ := g(b, "apply2-updates-%")
			n, _ := g(b, "rules")
			a1, _ := g(b, "apply1-api-s")
			t1, _ := g(b, "apply1-bird-s")
			u1, _ := g(b, "apply1-updates")
			a2, _ := g(b, "apply2-api-s")
			t2, _ := g(b, "apply2-bird-s")
			u2, _ := g(b, "apply2-updates")
			a3, _ := g(b, "apply3-api-s")
			u3, _ := g(b, "apply3-updates")
			peak, _ := g(b, "MB-peak")
			return fmt.Sprintf("%s rules: first apply %s s (API), %s s until BIRD held all, %s UPDATE messages; 1 %% of the lines replaced: %s s (API), %s s to BIRD, route changes %s %% of the first apply's, %s UPDATE messages (%s %%); unchanged: %s s, %s UPDATEs; peak RSS %s MB",
				num(n), num(a1), num(t1), num(u1), num(a2), num(t2), num(routes), num(u2), num(pct), num(a3), num(u3), num(peak)), routes <= 2.01 && u3 == 0, true
		},
	},
	{
		what: "A million RTBH routes: /32 blackholes through POST /v1/rules/batch (5,000 a request) until a BIRD peer holds all, next to raw GoBGP v4 (AddPath, 2,000 a call) with its own BIRD",
		goal: "≥ 50,000 routes/s",
		eval: func(g getter) (string, bool, bool) {
			v, ok := g("BenchmarkRTBH/ours", "routes/s")
			if !ok {
				return "", false, false
			}
			n, _ := g("BenchmarkRTBH/ours", "routes")
			w, _ := g("BenchmarkRTBH/ours", "write-s")
			s := fmt.Sprintf("%s routes/s at %s routes (API done after %s s)", num(v), num(n), num(w))
			if st, ok := g("BenchmarkRTBH/ours", "status-s"); ok {
				s += fmt.Sprintf(", every status announced after %s s", num(st))
			}
			if r, ok := g("BenchmarkRTBH/gobgp", "routes/s"); ok && r > 0 {
				s += fmt.Sprintf("; raw GoBGP %s routes/s (ribkeeper %s×)", num(r), num(v/r))
			}
			if c, ok := g("BenchmarkRTBH/ours", "cpu-s"); ok {
				if rc, ok := g("BenchmarkRTBH/gobgp", "cpu-s"); ok {
					s += fmt.Sprintf("; the speaker process's CPU until BIRD held all: %s vs raw GoBGP %s CPU-s", num(c), num(rc))
				}
			}
			return s, v >= 50000, true
		},
	},
	{
		what: "A million RTBH routes: ribkeeper's peak RSS (VmHWM) with one BIRD peer",
		goal: "< 1.5 GiB",
		eval: func(g getter) (string, bool, bool) {
			v, ok := g("BenchmarkRTBH/ours", "MB-peak")
			if !ok {
				return "", false, false
			}
			s := fmt.Sprintf("%s MB", num(v))
			if r, ok := g("BenchmarkRTBH/gobgp", "MB-peak"); ok && r > 0 {
				s += fmt.Sprintf("; raw GoBGP %s MB (ribkeeper %s×)", num(r), num(v/r))
			}
			return s, v < 1536, true
		},
	},
	{
		what: "A million RTBH routes: settled RSS, ribkeeper ÷ raw GoBGP v4 holding the same paths with the same peer",
		goal: "≤ 1.3×",
		eval: func(g getter) (string, bool, bool) {
			fig, met, ok := ratio("BenchmarkRTBH/ours", "BenchmarkRTBH/gobgp", "MB-rss",
				func(r float64) bool { return r <= 1.3 }, "%.2f× (%s %s vs %s %s %s)")(g)
			if !ok {
				return fig, met, ok
			}
			if o, ok := g("BenchmarkRTBH/ours", "B-rss/path"); ok {
				r, _ := g("BenchmarkRTBH/gobgp", "B-rss/path")
				fig += fmt.Sprintf("; per route %s vs %s B", num(o), num(r))
			}
			return fig, met, true
		},
	},
	{
		what: "FastNetMon (gobgp = on): first attack datagram → route at BIRD, ribkeeper vs gobgpd 3.10, FastNetMon's own detection apart (issue 20)",
		goal: "ribkeeper's part after the detection ≤ gobgpd's at p50",
		eval: func(g getter) (string, bool, bool) {
			gd, ok1 := g("BenchmarkFastNetMon/gobgpd", "detect-p50-ms")
			gr, ok2 := g("BenchmarkFastNetMon/gobgpd", "route-p50-ms")
			ga, ok3 := g("BenchmarkFastNetMon/gobgpd", "after-detect-p50-ms")
			od, ok4 := g("BenchmarkFastNetMon/ours", "detect-p50-ms")
			oa, ok5 := g("BenchmarkFastNetMon/ours", "after-detect-p50-ms")
			if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
				return "", false, false
			}
			// Like for like: ribkeeper announcing gobgpd's route (a
			// blackhole of the host) to the same BIRD table.
			if ra, ok := g("BenchmarkFastNetMon/ours-rtbh", "after-detect-p50-ms"); ok {
				rr, _ := g("BenchmarkFastNetMon/ours-rtbh", "route-p50-ms")
				rd, _ := g("BenchmarkFastNetMon/ours-rtbh", "detect-p50-ms")
				fig := fmt.Sprintf("gobgpd: route p50 %s ms (FastNetMon's detection %s, then %s); ribkeeper, the same blackhole route: p50 %s ms (detection %s, then %s)",
					num(gr), num(gd), num(ga), num(rr), num(rd), num(ra))
				gm, _ := g("BenchmarkFastNetMon/gobgpd", "after-detect-mean-ms")
				rm, _ := g("BenchmarkFastNetMon/ours-rtbh", "after-detect-mean-ms")
				fig += fmt.Sprintf("; after the detection, mean: gobgpd %s, ribkeeper %s ms", num(gm), num(rm))
				if or, ok := g("BenchmarkFastNetMon/ours", "route-p50-ms"); ok {
					fig += fmt.Sprintf("; ribkeeper with a FlowSpec discard rule instead: route p50 %s ms (detection %s, then %s)", num(or), num(od), num(oa))
				}
				return fig, ra <= ga, true
			}
			if or, ok := g("BenchmarkFastNetMon/ours", "route-p50-ms"); ok {
				fig := fmt.Sprintf("gobgpd: route p50 %s ms (FastNetMon's detection %s, then %s); ribkeeper: route p50 %s ms (detection %s, then %s)",
					num(gr), num(gd), num(ga), num(or), num(od), num(oa))
				gm, ok1 := g("BenchmarkFastNetMon/gobgpd", "after-detect-mean-ms")
				om, ok2 := g("BenchmarkFastNetMon/ours", "after-detect-mean-ms")
				if ok1 && ok2 {
					fig += fmt.Sprintf("; after the detection, mean: gobgpd %s, ribkeeper %s ms", num(gm), num(om))
				}
				return fig, oa <= ga, true
			}
			osig, _ := g("BenchmarkFastNetMon/ours", "signal-p50-ms")
			return fmt.Sprintf("gobgpd: route p50 %s ms (FastNetMon's detection %s, then %s); ribkeeper: signal accepted p50 %s ms (detection %s, then %s), no route until the playbook engine turns it into a rule",
				num(gr), num(gd), num(ga), num(osig), num(od), num(oa)), false, true
		},
	},
}

func nsBelow(name string, ms float64) func(getter) (string, bool, bool) {
	return func(g getter) (string, bool, bool) {
		v, ok := g(name, "ns/op")
		if !ok {
			return "", false, false
		}
		return num(v/1e6) + " ms", v/1e6 < ms, true
	}
}

func reportTargets(w io.Writer, results []*result) {
	g := func(name, unit string) (float64, bool) {
		for _, r := range results {
			if r.name == name {
				v, ok := r.metrics[unit]
				return v, ok
			}
		}
		return 0, false
	}
	fmt.Fprintf(w, "## Targets (issues 10 and 5)\n\n| figure | goal | this run | met |\n|---|---|---|---|\n")
	for _, t := range targets {
		fig, met, ok := t.eval(g)
		verdict := "no"
		switch {
		case !ok:
			fig, verdict = "not in this run", "-"
		case met:
			verdict = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.what, t.goal, strings.ReplaceAll(fig, "|", "/"), verdict)
	}
	fmt.Fprintln(w)
}

// roundSpread describes the rounds of a latency benchmark whose ours and
// exabgp sides ran in turn (e2e/bench_latency_test.go): how many, the
// spread of each side's per-round p50 and p99, and in how many rounds
// ours was at or below ExaBGP. Empty for a run without rounds.
func roundSpread(g getter, bench string) string {
	n, ok := g(bench+"/ours", "rounds")
	if !ok {
		return ""
	}
	v := func(who, unit string) string {
		x, _ := g(bench+"/"+who, unit)
		return num(x)
	}
	le50, _ := g(bench+"/ours", "rounds-p50-le")
	le99, _ := g(bench+"/ours", "rounds-p99-le")
	return fmt.Sprintf(", all of %.0f rounds of 200 pooled, the two in turn; the rounds' own p50: ribkeeper %s–%s, ExaBGP %s–%s ms; p99: ribkeeper %s–%s, ExaBGP %s–%s ms; ribkeeper at or below ExaBGP in %.0f of %.0f rounds at p50, %.0f at p99",
		n, v("ours", "p50-lo-ms"), v("ours", "p50-hi-ms"), v("exabgp", "p50-lo-ms"), v("exabgp", "p50-hi-ms"),
		v("ours", "p99-lo-ms"), v("ours", "p99-hi-ms"), v("exabgp", "p99-lo-ms"), v("exabgp", "p99-hi-ms"),
		le50, n, le99)
}

// bulkRounds judges BenchmarkBulk run in rounds, ours and raw GoBGP in
// turn (e2e/bench_rounds_test.go): the median of the per-round ratios
// against goal, with each round's ratio, how many met the goal, and each
// side's median rate and CPU with their spread. ok is false for a run
// without BenchmarkBulk.
func bulkRounds(g getter, goal float64) (fig string, met, ok bool) {
	const o, r = "BenchmarkBulk/ours", "BenchmarkBulk/gobgp"
	x, ok := g(o, "x-gobgp")
	if !ok {
		return "", false, false
	}
	n, _ := g(o, "rounds")
	v := g.num
	var each []string
	for i := 1; i <= int(n); i++ {
		if xi, ok := g(o, fmt.Sprintf("x-gobgp-r%d", i)); ok {
			each = append(each, fmt.Sprintf("%.2f", xi))
		}
	}
	ge, _ := g(o, "rounds-ge-goal")
	fig = fmt.Sprintf("%.2f×, the median of %.0f rounds in turn (each round: %s; %.0f of %.0f at %.1f× or more); rules/s median (lo–hi): ribkeeper %s (%s–%s), raw GoBGP %s (%s–%s); CPU-s median: %s vs %s",
		x, n, strings.Join(each, ", "), ge, n, goal,
		v(o, "rules/s"), v(o, "rules/s-lo"), v(o, "rules/s-hi"), v(r, "rules/s"), v(r, "rules/s-lo"), v(r, "rules/s-hi"),
		v(o, "cpu-s"), v(r, "cpu-s"))
	for _, who := range []string{"ours", "gobgp", "exabgp"} {
		if u, ok := g("BenchmarkBulk/"+who, "updates"); ok {
			fig += fmt.Sprintf("; %s %s rules/s in %s UPDATEs", who, v("BenchmarkBulk/"+who, "rules/s"), num(u))
		}
	}
	return fig, x >= goal, true
}

// churnBounded judges BenchmarkChurn: ours' verdict on the live-heap
// floors of its two windows after warm-up (e2e/bench_churnmem_test.go),
// with the peaks, RSS and compactions of each window, and raw GoBGP's
// beside. ok is false for a run without BenchmarkChurn.
func churnBounded(g getter) (string, bool, bool) {
	const o, r = "BenchmarkChurn/ours", "BenchmarkChurn/gobgp"
	v := g.num
	n, _ := g(o, "rules")
	verdict, ok := g(o, "bounded")
	if !ok {
		return "", false, false
	}
	side := func(name string) string {
		return fmt.Sprintf("live heap floor %s → %s MB (peaks %s, %s MB), RSS floor %s → %s MB (peaks %s, %s MB)",
			v(name, "MB-live-floor-w1"), v(name, "MB-live-floor-w2"), v(name, "MB-live-peak-w1"), v(name, "MB-live-peak-w2"),
			v(name, "MB-rss-floor-w1"), v(name, "MB-rss-floor-w2"), v(name, "MB-rss-peak-w1"), v(name, "MB-rss-peak-w2"))
	}
	c1, _ := g(o, "compactions-w1")
	c2, _ := g(o, "compactions-w2")
	fig := fmt.Sprintf("%s rules; ribkeeper: %s, %.0f and %.0f compactions in the two windows; settled %s MB after, %s B/rule",
		num(n), side(o), c1, c2, v(o, "MB-rss"), v(o, "B-rss/churned"))
	if c1 == 0 || c2 == 0 {
		fig += " (a window without a compaction: the churn was too short or too slow to show the bound there; between compactions the floor follows GoBGP's own leak)"
	}
	if rv, ok := g(r, "bounded"); ok {
		word := "bounded"
		if rv != 1 {
			word = "not bounded"
		}
		fig += fmt.Sprintf("; raw GoBGP (%s): %s, settled %s MB after", word, side(r), v(r, "MB-rss"))
	}
	return fig, verdict == 1, true
}
