#!/usr/bin/env bash
# Audit-log benchmarks: the cost of recording denials in PostgreSQL with
# pgstore/pgaudit, auditing off and on (BenchmarkDenied as fast as one
# goroutine goes; BenchmarkDeniedAt20k paced at 20,000 denials a second).
# pgaudit's benchmarks start their own PostgreSQL.
#
# Writes results/<date>-<commit>-audit.txt (Go benchmark format, with the
# load average at the start and the end). COUNT (default 10) is the number
# of runs of each configuration. Takes about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")"

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-audit.txt}
count=${COUNT:-10}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out"
(
	cd ..
	FAUCET_REQUIRE_POSTGRES=1 go test -run '^$' -bench '^BenchmarkDenied$' -count "$count" ./pgstore/pgaudit
	FAUCET_REQUIRE_POSTGRES=1 go test -run '^$' -bench '^BenchmarkDeniedAt20k$' -benchtime 40000x -count "$count" ./pgstore/pgaudit
) | tee -a "$out"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"
echo "wrote $out"
