#!/usr/bin/env bash
# Measures an adaptive rate through a real faucet serve on loopback, in
# front of an upstream whose capacity drops. httpload capacity serves 1000
# requests a second, first in first out, one at a time, then 200 from
# 20 s, then 1000 again from 50 s. faucet serve passes it a global rule of
# 1000 rps, burst 1000 (the least a rule of 1000 rps may have; the load
# keeps the bucket empty anyway), adaptive with floor 50 and a 50 ms
# target for the p99 (--upstream-timeout 1s, as the simulator's).
# httpload adapt offers 1500 requests a second, open loop, for 70 s, after
# 3 s of warm-up in which the upstream serves 2000 a second (the bucket,
# full at first, passes its burst on top of the rate until it is empty;
# the warm-up takes that without a queue, so that the run starts with the
# rate at its ceiling and the upstream at its capacity), and scrapes
# faucet_adaptive_rate from the admin listener every second. Every
# process is separate. Two runs, the upstream's queue unbounded (65536)
# and bounded (100, 503 beyond). Stores, per second, the capacity, the
# rate, what the clients sent, got admitted and denied, what the upstream
# served and its p99; then, for each change of capacity, the seconds until
# the upstream's p99 is under the target for 3 s in a row and the admitted
# rate over the 10 s after that, as results/<date>-<commit>-adaptive.txt,
# which the report (go run ./report) shows in BENCHMARKS.md. OUT names
# another file (for a smoke run); DURATION, RATE, SCHEDULE and QUEUES (the
# queue bounds, a run each) change the runs. Takes about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")"

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
out=${OUT:-results/$(date -u +%Y-%m-%d)-$commit-adaptive.txt}
duration=${DURATION:-70s}
rate=${RATE:-1500}
schedule=${SCHEDULE:-1000,20s=200,50s=1000}
queues=${QUEUES:-65536 100}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/httpload" ./httpload
(cd ../cmd && go build -o "$tmp/faucet" ./faucet)
rule='{"rules":[{"name":"upstream","limit_keys":["global"],"algorithm_config":{"rps":1000,"burst":1000},"adaptive":{"floor":50,"latency_target":"50ms"}}]}'
echo "$rule" > "$tmp/rules.json"

# Below Linux's ephemeral ports (32768 and up), which outgoing connections
# take.
up=127.0.0.1:29511 fa=127.0.0.1:29512 admin=127.0.0.1:29513

{
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores, shared by faucet serve, the upstream and the load)"
	echo "rule: $rule"
	echo "note: upstream capacity $schedule (requests/s, first in first out, one request at a time; queue=N: at most N waiting, 503 beyond), $rate requests/s open loop for $duration after 3 s of warm-up at twice the first capacity, --upstream-timeout 1s; per second of the run: the capacity, the adaptive rate scraped mid-second, what the clients sent in the second and got admitted (any answer but 429), denied (429) and 200 for, what the upstream served and abandoned (the proxy gave up) in the second and the p99 of their latency from arrival at the upstream"
	echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out"

# one QUEUE runs the servers afresh, the upstream letting at most QUEUE
# requests wait, and appends the run to $out.
one() {
	local queue=$1 start
	# Three seconds to start the servers in, then 3 s of warm-up; the
	# upstream's schedule and the load count from the same instant.
	start=$(($(date +%s) + 6))
	"$tmp/httpload" capacity --listen $up --schedule "$schedule" --queue "$queue" --start $start > /dev/null & pids+=($!)
	local up_pid=$!
	"$tmp/faucet" serve --listen $fa --admin-listen $admin --upstream http://$up --rules "$tmp/rules.json" --watch 0 \
		--upstream-timeout 1s --write-timeout 5s 2> "$tmp/faucet.log" & pids+=($!)
	local faucet_pid=$!
	for a in $up/healthz $fa/healthz $admin/healthz; do
		local answered=""
		for _ in $(seq 20); do curl -s -o /dev/null "http://$a" && answered=1 && break; sleep 0.1; done
		if [ -z "$answered" ]; then
			echo "adaptive.sh: nothing answers at $a after 2 s" >&2
			cat "$tmp/faucet.log" >&2
			exit 1
		fi
	done
	if (($(date +%s) >= start - 3)); then
		echo "adaptive.sh: the servers took longer than 3 s to start; run it again" >&2
		exit 1
	fi
	"$tmp/httpload" adapt --label "queue=$queue" --target http://$fa/x --metrics http://$admin/metrics --upstream-stats http://$up/stats \
		--start $start --warmup 3s --rate "$rate" --duration "$duration" --latency-target 50ms | tee -a "$out"
	kill $faucet_pid $up_pid
	wait $faucet_pid $up_pid 2>/dev/null || true
}
# 65536 never fills: requests wait until the proxy gives up on them, and
# the upstream spends its time on requests that time out as it serves
# them. 100 is half a second of work at 200 a second: beyond it the
# upstream answers 503 at once, and what it serves it serves in time.
for q in $queues; do
	one "$q"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"

echo "wrote $out"
