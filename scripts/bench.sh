#!/usr/bin/env bash
# Runs every benchmark once, side by side with raw GoBGP v4 (and ExaBGP)
# where a pair exists,
# and writes BENCHMARKS.md from that run (raw output in bench.out).
#
# Two go test invocations:
#  1. the scenario benchmarks (whole-system runs against BIRD and in-process
#     loops; each op is one complete scenario), with -benchtime 1x;
#  2. every other (micro) benchmark with the normal BENCHTIME.
# Sizes: RIBKEEPER_BENCH_RULES (100000), RIBKEEPER_BENCH_CHURN (1000000),
# RIBKEEPER_BENCH_REPAIRS (1000), RIBKEEPER_BENCH_EXPIRING (10000),
# RIBKEEPER_BENCH_SET (1000000: the RTBH routes of BenchmarkSets),
# RIBKEEPER_BENCH_RTBH (1000000: the routes of BenchmarkRTBH),
# RIBKEEPER_BENCH_WRITES (100000: the rules of BenchmarkAPIWriteBatch*).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BENCHTIME=${BENCHTIME:-1s}
SCENARIOS='^Benchmark(Bulk|Restart|RestartGR|TimeToMitigate|TimeToWithdraw|SignalToUpdate|Churn|ResyncPass|DriftRepair|ExpiryLateness|Propagation|Sets|RTBH|FastNetMon|APIWriteBatch|APIWriteBatchLoaded)$'
export RIBKEEPER_BENCH_RULES=${RIBKEEPER_BENCH_RULES:-100000}
export RIBKEEPER_BENCH_CHURN=${RIBKEEPER_BENCH_CHURN:-1000000}
export RIBKEEPER_BENCH_REPAIRS=${RIBKEEPER_BENCH_REPAIRS:-1000}
export RIBKEEPER_BENCH_EXPIRING=${RIBKEEPER_BENCH_EXPIRING:-10000}
export RIBKEEPER_BENCH_SET=${RIBKEEPER_BENCH_SET:-1000000}
export RIBKEEPER_BENCH_RTBH=${RIBKEEPER_BENCH_RTBH:-1000000}
export RIBKEEPER_BENCH_WRITES=${RIBKEEPER_BENCH_WRITES:-100000}

sizes="RIBKEEPER_BENCH_RULES=$RIBKEEPER_BENCH_RULES RIBKEEPER_BENCH_CHURN=$RIBKEEPER_BENCH_CHURN RIBKEEPER_BENCH_REPAIRS=$RIBKEEPER_BENCH_REPAIRS RIBKEEPER_BENCH_EXPIRING=$RIBKEEPER_BENCH_EXPIRING RIBKEEPER_BENCH_SET=$RIBKEEPER_BENCH_SET RIBKEEPER_BENCH_RTBH=$RIBKEEPER_BENCH_RTBH RIBKEEPER_BENCH_WRITES=$RIBKEEPER_BENCH_WRITES"
cmd1="$GO test -run '^\$' -bench '$SCENARIOS' -benchtime 1x -timeout 150m ./e2e/"
cmd2="$GO test -run '^\$' -bench . -skip '$SCENARIOS' -benchmem -benchtime $BENCHTIME -timeout 60m ./..."
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)

echo "$sizes"
echo "$cmd1"
# A failing benchmark must not lose the others' figures: report, then fail.
status=0
$GO test -run '^$' -bench "$SCENARIOS" -benchtime 1x -timeout 150m ./e2e/ 2>&1 | tee bench.out || status=1
echo "$cmd2"
$GO test -run '^$' -bench . -skip "$SCENARIOS" -benchmem -benchtime "$BENCHTIME" -timeout 60m ./... 2>&1 | tee -a bench.out || status=1

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# The code measured: a commit, and whether the working tree differed from it.
if commit=$(git rev-parse --short HEAD 2>/dev/null); then
	dirty=$(git status --porcelain --untracked-files=no -- ':!BENCHMARKS.md' | wc -l)
	[ "$dirty" = 0 ] || commit="$commit + $dirty modified files"
else
	commit=${RIBKEEPER_BENCH_COMMIT:-unknown}
fi
minutes=$(( ($(date +%s) - started + 59) / 60 ))
$GO run ./scripts/benchreport -in bench.out -out BENCHMARKS.md \
	-cmd "make bench  # $sizes; $cmd1; $cmd2" \
	-env "code: $commit" \
	-env "cores: $(nproc); load average (1/5/15 min) before: $load_before, after: $load_after; wall time: ${minutes} min" \
	-notes scripts/benchreport/NOTES.md
echo "wrote BENCHMARKS.md"
if [ "$status" != 0 ]; then
	echo "some benchmarks failed: see bench.out" >&2
fi
exit "$status"
