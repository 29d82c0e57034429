#!/usr/bin/env bash
# Runs every benchmark once, side by side with raw GoBGP where a pair exists,
# and writes BENCHMARKS.md from that run (raw output in bench.out).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BENCHTIME=${BENCHTIME:-1s}
cmd="$GO test -run ^\$ -bench . -benchmem -benchtime $BENCHTIME -timeout 60m ./..."
echo "$cmd"
$GO test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" -timeout 60m ./... 2>&1 | tee bench.out
$GO run ./scripts/benchreport -in bench.out -out BENCHMARKS.md -cmd "make bench  # $cmd"
echo "wrote BENCHMARKS.md"
