#!/usr/bin/env bash
# PostgreSQL benchmarks: checks per second and latency of a limit kept in one
# local PostgreSQL at 1, 16 and 64 concurrent callers, on one hot key and on
# 1e4 keys, for faucet's pgstore (and pgstore with coalescing off,
# faucet_single), the common SELECT ... FOR UPDATE
# transaction (for_update) and, for the choice between the two stores,
# faucet's redisstore against a local redis-server (BenchmarkPostgres); and
# pgstore's leased limiter beside pgstore per check and the engine alone,
# on few hot keys (BenchmarkLeasedPostgres). The
# benchmark starts both servers itself (PostgreSQL through pgstore/pgtest,
# fsync off, on a free loopback port; redis-server without persistence).
#
# Writes results/<date>-<commit>-postgres.txt (Go benchmark format). COUNT
# (default 10) is the number of runs of each configuration, BENCHTIME
# (default 1s) the length of each. Takes about 14 minutes.
set -euo pipefail
cd "$(dirname "$0")"
command -v redis-server > /dev/null || { echo "redis-server not found: apt-get install -y redis-server" >&2; exit 1; }
# The binaries pgtest picks: initdb and postgres on the PATH, else Debian's
# newest /usr/lib/postgresql/<version>/bin.
pgbin=""
if command -v initdb > /dev/null && command -v postgres > /dev/null; then
	pgbin=$(dirname "$(command -v postgres)")
else
	pgbin=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1 || true)
fi
[ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] || { echo "PostgreSQL not found: apt-get install -y postgresql" >&2; exit 1; }

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-postgres.txt}
count=${COUNT:-10}
benchtime=${BENCHTIME:-1s}
mkdir -p "$(dirname "$out")"

{
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "postgres: $("$pgbin/postgres" --version | awk '{print $3}')"
	echo "redis: $(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/')"
	echo "note: one PostgreSQL (fsync off, UNLOGGED tables) and one redis-server (no persistence) on loopback; pool of 64 connections; tables emptied before each run"
	echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out"

FAUCET_REQUIRE_POSTGRES=1 FAUCET_REQUIRE_REDIS=1 go test -run '^$' -bench '^(BenchmarkPostgres|BenchmarkLeasedPostgres)$' -benchtime "$benchtime" -count "$count" -timeout 0 . | tee -a "$out"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"
echo "wrote $out"
