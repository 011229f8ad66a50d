#!/usr/bin/env bash
# Runs BenchmarkShapes 10 times (a check in each shape of limit beside the
# token bucket's) and stores the raw output as
# results/<date>-<commit>-shapes.txt, which the report (go run ./report)
# shows in BENCHMARKS.md. Takes about a minute; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")"

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
out="results/$(date -u +%Y-%m-%d)-$commit-shapes.txt"
mkdir -p results
go test -run '^$' -bench '^BenchmarkShapes$' -benchmem -count 10 -timeout 0 . | tee "$out"

echo "wrote $out"
