#!/usr/bin/env bash
# A limit shared under a hot key: four faucet serve instances on one store
# (a local PostgreSQL through pgstore/pgtest, fsync off; a local
# redis-server without persistence), sixteen clients per instance checking
# one API key through the check API as fast as they can, 100/s with burst
# 100, for 8 s, per store and mode (per check; --lease)
# (BenchmarkSharedHotKey in cmd/faucet). Each run reports what was admitted
# against the bound of one limit (burst + rate × span), the share of the
# rate reached, the instances' store errors and the checks answered per
# second. The benchmark starts the servers and the instances itself.
#
# Writes results/<date>-<commit>-sharedload.txt (Go benchmark format).
# COUNT (default 10) is the number of runs of each configuration, SPAN
# (default 8s) the length of each. Takes about 8 minutes.
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
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-sharedload.txt}
count=${COUNT:-10}
span=${SPAN:-8s}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

{
	echo "postgres: $("$pgbin/postgres" --version | awk '{print $3}')"
	echo "redis: $(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/')"
	echo "note: 4 faucet serve instances on one store, 16 clients each on one API key, 100/s burst 100, $span per run; the store, the instances and the clients share the machine's cores"
	echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out"

(cd ../cmd && FAUCET_REQUIRE_POSTGRES=1 FAUCET_REQUIRE_REDIS=1 go test -run '^$' -bench '^BenchmarkSharedHotKey$' \
	-benchtime 1x -count "$count" -timeout 0 ./faucet -sharedload-span "$span") | tee -a "$out"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"
echo "wrote $out"
