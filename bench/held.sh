#!/usr/bin/env bash
# Runs httplimit's benchmarks of requests held back or held open: 10 runs
# of BenchmarkHandlerHeld (a check through Handler under an in-flight
# limit and in delay mode, beside a token bucket alone) and 10 of
# BenchmarkDelayWaiting (what 10,000 requests waiting at once in delay
# mode hold, one run of the whole setup each), and stores the raw output
# as results/<date>-<commit>-held.txt, which the report (go run ./report)
# shows in BENCHMARKS.md. COUNT overrides the 10 runs (COUNT=1 for a
# smoke run, OUT for its file). Takes about a minute; run it on a quiet
# machine.
set -euo pipefail
cd "$(dirname "$0")"

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
count=${COUNT:-10}
out=${OUT:-results/$(date -u +%Y-%m-%d)-$commit-held.txt}
mkdir -p "$(dirname "$out")"
{
	echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "note: BenchmarkDelayWaiting serves its 10,000 requests through net/http, one in-memory connection each; heap bytes are live objects (HeapAlloc), stack bytes the stack spans in use"
	echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out"
(cd .. && go test -run '^$' -bench '^BenchmarkHandlerHeld$' -benchmem -count "$count" ./httplimit/) | tee -a "$out"
(cd .. && go test -run '^$' -bench '^BenchmarkDelayWaiting$' -benchtime 1x -count "$count" ./httplimit/) | grep '^Benchmark' | tee -a "$out"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"

echo "wrote $out"
