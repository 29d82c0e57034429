package store

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

var benchEngines = []struct {
	name  string
	fresh freshFunc
}{
	{"sqlite", sqliteFresh},
	{"postgres", postgresFresh},
}

// benchRules returns n distinct rules, parsed once outside the timer.
func benchRules(b *testing.B, n int) []flowspec.Rule {
	rs := make([]flowspec.Rule, n)
	for i := range rs {
		rs[i] = rule(b, i, "discard")
	}
	return rs
}

// BenchmarkUpsert measures single-rule upserts of new rules, each its own
// committed transaction (SQLite: synchronous=FULL, one fsync each).
func BenchmarkUpsert(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, b.N)
			ctx := ctxT(b)
			b.ResetTimer()
			for i := range b.N {
				if _, _, err := s.Upsert(ctx, Input{Rule: rs[i], Actor: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rules/s")
		})
	}
}

// BenchmarkUpsertMany measures batches of 10000 new rules, one transaction
// per batch; cpu-µs/rule is the process's CPU per rule (steadier than the
// rate on a shared machine).
func BenchmarkUpsertMany(b *testing.B) {
	const batch = 10000
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, batch*b.N)
			ctx := ctxT(b)
			ins := make([]Input, batch)
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := range b.N {
				for j := range ins {
					ins[j] = Input{Rule: rs[i*batch+j], Actor: "bench"}
				}
				if _, err := s.UpsertMany(ctx, ins); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "rules/s")
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(batch*b.N), "cpu-µs/rule")
		})
	}
}

// BenchmarkUpsertParallel measures single-rule upserts of new rules from
// many concurrent callers (64 per CPU), as the API makes them. On SQLite
// the group committer commits many callers' upserts per fsync.
func BenchmarkUpsertParallel(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, b.N)
			ctx := ctxT(b)
			var next atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) - 1
					if _, _, err := s.Upsert(ctx, Input{Rule: rs[i], Actor: "bench"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rules/s")
		})
	}
}

// BenchmarkFinishMany measures an expiry burst: 10,000 expired rules
// finished with one FinishMany call (what the reconciler makes).
func BenchmarkFinishMany(b *testing.B) {
	const batch = 10000
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, batch*b.N)
			ctx := ctxT(b)
			items := make([][]FinishItem, b.N)
			var exp time.Time
			for i := range b.N {
				exp = time.Now().Add(200 * time.Millisecond)
				ins := make([]Input, batch)
				for j := range ins {
					ins[j] = Input{Rule: rs[i*batch+j], Actor: "bench", ExpiresAt: exp}
				}
				stored, err := s.UpsertMany(ctx, ins)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range stored {
					items[i] = append(items[i], FinishItem{ID: r.ID, State: Expired})
				}
			}
			time.Sleep(time.Until(exp))
			b.ResetTimer()
			for i := range b.N {
				errs, err := s.FinishMany(ctx, items[i])
				if err != nil || errs[0] != nil {
					b.Fatal(err, errs[0])
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "rules/s")
		})
	}
}

// BenchmarkEarlyOK measures the preflight of a single write (a new rule
// among 1,000 stored): what early announcement adds before the UPDATE
// leaves, against the commit it takes off the path (BenchmarkUpsert).
func BenchmarkEarlyOK(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, 1001)
			ctx := ctxT(b)
			storeBench(b, s, rs[:1000], "bench")
			in := Input{Rule: rs[1000], Actor: "bench"}
			b.ResetTimer()
			for range b.N {
				if err := s.EarlyOK(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEarlyWithdrawRead measures what a single withdrawal reads
// before its UPDATE leaves (the rule by id, then EarlyWithdrawOK), with
// 1,000 rules stored; and ChangedSince after one change, the reconciler's
// read after every single write.
func BenchmarkEarlyWithdrawRead(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, 1000)
			ctx := ctxT(b)
			stored := storeBench(b, s, rs, "bench")
			b.ResetTimer()
			for i := range b.N {
				r, err := s.GetBrief(ctx, stored[i%len(stored)].ID)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.EarlyWithdrawOK(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkChangedSinceOne(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, 1001)
			ctx := ctxT(b)
			storeBench(b, s, rs[:1000], "bench")
			rev, err := s.Revision(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.Upsert(ctx, Input{Rule: rs[1000], Actor: "bench"}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				d, err := s.ChangedSince(ctx, rev)
				if err != nil || len(d.Active) != 1 {
					b.Fatalf("ChangedSince = %d rules, %v", len(d.Active), err)
				}
			}
		})
	}
}

// BenchmarkQuotaCounts measures the quota reads a single write makes
// before its UPDATE may leave, with 100,000 active rules: the lookup of
// its Match alone (no quota set), with [guardrails] max_active_rules (a
// count of every active rule), and with a scoped token's
// max_active_rules (a count of its rules; here all of them).
func BenchmarkQuotaCounts(b *testing.B) {
	const n = 100_000
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			ctx := ctxT(b)
			rs := benchRules(b, n+1)
			storeBench(b, s, rs[:n], "token")
			m := []flowspec.Match{rs[n].Match}
			for _, q := range []struct {
				name string
				q    QuotaQuery
			}{
				{"match", QuotaQuery{Matches: m}},
				{"total", QuotaQuery{Total: true, Matches: m}},
				{"actor", QuotaQuery{Actor: "token", Matches: m}},
			} {
				b.Run(q.name, func(b *testing.B) {
					for range b.N {
						if _, err := s.QuotaCounts(ctx, q.q); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// storeBench stores rs as active rules of actor, 10,000 a transaction, and
// returns them as stored.
func storeBench(b *testing.B, s *Store, rs []flowspec.Rule, actor string) []Rule {
	b.Helper()
	ctx := ctxT(b)
	var out []Rule
	for lo := 0; lo < len(rs); lo += 10_000 {
		ins := make([]Input, 0, min(10_000, len(rs)-lo))
		for _, r := range rs[lo:min(lo+10_000, len(rs))] {
			ins = append(ins, Input{Rule: r, Actor: actor})
		}
		stored, err := s.UpsertMany(ctx, ins)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, stored...)
	}
	return out
}

// processCPU is the CPU time this process has used (user and system).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChangedSinceBulk is the reconciler's read-back during a bulk
// load: 5,000 rules written in one batch, then read as the changes since
// the revision before it. cpu-µs/rule is the process's CPU per rule read.
func BenchmarkChangedSinceBulk(b *testing.B) {
	const batch = 5000
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			rs := benchRules(b, batch*b.N)
			ctx := ctxT(b)
			var cpu time.Duration
			for i := range b.N {
				b.StopTimer()
				rev, err := s.Revision(ctx)
				if err != nil {
					b.Fatal(err)
				}
				storeBench(b, s, rs[i*batch:(i+1)*batch], "bench")
				b.StartTimer()
				cpu0 := processCPU(b)
				n := 0
				if _, err := s.EachChangedSince(ctx, rev, func(*Rule) error { n++; return nil }); err != nil || n != batch {
					b.Fatalf("EachChangedSince = %d rules, %v", n, err)
				}
				cpu += processCPU(b) - cpu0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(batch*b.N), "cpu-µs/rule")
		})
	}
}

// BenchmarkSetStatus is a status report after a bulk load: 5,000 rules
// turning announced (then not, then announced again) in one call, as the
// reconciler's status chunks do. cpu-µs/rule is the process's CPU per
// status written, its history entry included.
func BenchmarkSetStatus(b *testing.B) {
	const n = 5000
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := open(b, e.fresh(b), "a")
			stored := storeBench(b, s, benchRules(b, n), "bench")
			ids := make([]int64, len(stored))
			for i, r := range stored {
				ids[i] = r.ID
			}
			ctx := ctxT(b)
			cpu0 := processCPU(b)
			for i := range b.N {
				if err := s.SetStatus(ctx, ids, i%2 == 0, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(n*b.N), "cpu-µs/rule")
		})
	}
}
