#!/usr/bin/env bash
# Redis benchmarks: checks per second and latency against one local
# redis-server at 1, 16 and 64 concurrent callers, for faucet's redisstore,
# go-redis/redis_rate and a no-op script through rueidis (BenchmarkRedis),
# faucet's leased mode against them and the engine on hot keys
# (BenchmarkLeased), Envoy's rate-limit service, faucet's against
# envoyproxy/ratelimit's (BenchmarkRLS),
# and redis-benchmark running the same no-op script by EVALSHA: the server's
# ceiling on this machine. Every run uses the same server, started here
# without persistence on a free loopback port.
#
# Writes results/<date>-<commit>-redis.txt (Go benchmark format; the
# redis-benchmark rows converted to it) and, next to it, -redis-raw.txt
# (redis-benchmark's own CSV output, unedited, and the server's time per
# script call from INFO commandstats). COUNT (default 10) is the
# number of runs of each configuration; REQUESTS (default 200000) the
# requests of each redis-benchmark run. Takes about 15 minutes.
set -euo pipefail
cd "$(dirname "$0")"
command -v redis-server > /dev/null || { echo "redis-server not found: apt-get install -y redis-server" >&2; exit 1; }
command -v redis-benchmark > /dev/null || { echo "redis-benchmark not found: apt-get install -y redis-tools" >&2; exit 1; }

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-redis.txt}
raw=${out%.txt}-raw.txt
count=${COUNT:-10}
requests=${REQUESTS:-200000}
procs=${GOMAXPROCS:-$(nproc)}
suffix=""
if [ "$procs" != 1 ]; then
	suffix="-$procs"
fi
mkdir -p "$(dirname "$out")"

tmp=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT

# A free port is one redis-server manages to bind: try random ones.
for _ in $(seq 20); do
	port=$(shuf -i 20000-60000 -n 1)
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --logfile "$tmp/redis.log" &
	pid=$!
	for _ in $(seq 50); do
		if redis-cli -p "$port" ping > /dev/null 2>&1; then break 2; fi
		if ! kill -0 "$pid" 2> /dev/null; then break; fi
		sleep 0.1
	done
	kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; pid=""
done
[ -n "$pid" ] || { echo "could not start redis-server" >&2; exit 1; }
addr=127.0.0.1:$port

{
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "redis: $(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/')"
	echo "note: one redis-server on loopback, no persistence; FLUSHALL before each implementation; 1e4 keys, a limit that never binds"
} > "$out"
: > "$raw"

FAUCET_REDIS_ADDR=$addr go test -run '^$' -bench '^BenchmarkRedis$' -count "$count" -timeout 0 . | tee -a "$out"
FAUCET_REDIS_ADDR=$addr go test -run '^$' -bench '^BenchmarkLeased$' -count "$count" -timeout 0 . | tee -a "$out"
FAUCET_REDIS_ADDR=$addr go test -run '^$' -bench '^BenchmarkRLS$' -count "$count" -timeout 0 . | tee -a "$out"

# The ceiling: redis-benchmark sends EVALSHA of the no-op script from c
# connections, one request outstanding on each (-P 1), so c connections are
# c callers that each wait for their reply. (rueidis pipelines all callers'
# commands onto one connection, so at 16 and 64 callers faucet's client
# may batch more per system call than redis-benchmark does.)
sha=$(redis-cli -p "$port" script load 'return 1')
for _ in $(seq "$count"); do
	for c in 1 16 64; do
		redis-cli -p "$port" flushall > /dev/null
		redis-cli -p "$port" config resetstat > /dev/null
		cmd="redis-benchmark -h 127.0.0.1 -p $port -c $c -n $requests -P 1 --csv EVALSHA $sha 0"
		echo "\$ $cmd" >> "$raw"
		csv=$($cmd)
		echo "$csv" >> "$raw"
		# cmdstat_evalsha:calls=N,usec=U,usec_per_call=X,...
		server=$(redis-cli -p "$port" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')
		echo "server usec_per_call=$server" >> "$raw"
		# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
		echo "$csv" | tail -1 | tr -d '"' | awk -F, -v c="$c" -v n="$requests" -v s="$suffix" -v srv="${server:-0}" '{
			printf "BenchmarkRedis/impl=noop_evalsha/callers=%d%s\t%d\t%.1f ns/op\t%.0f checks/s\t%.0f p50-ns\t%.0f p99-ns\t1 admit/op\t%.0f server-ns/op\n",
				c, s, n, 1e9 / $2, $2, $5 * 1e6, $7 * 1e6, srv * 1e3
		}' | tee -a "$out"
	done
done
echo "wrote $out and $raw"
