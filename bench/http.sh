#!/usr/bin/env bash
# Load test of faucet serve on loopback: requests/s and latency percentiles
# straight to an upstream, through a plain reverse proxy, and through faucet
# serve (a per-IP rule that never binds, and the built-in 5 rps rule that
# denies almost everything), every process separate, with the CPU time the
# front process spends per request. Writes Go benchmark lines to the file
# given (default results/<date>-<commit>-http.txt), and httplimit's
# BenchmarkCheck beside it (-check.txt). Takes about 8 minutes
# (RUNS=8 rounds).
set -euo pipefail
cd "$(dirname "$0")"
commit=$(git rev-parse --short HEAD)
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-http.txt}
runs=${RUNS:-8}
rate=${RATE:-2000}
conns=${CONNS:-16}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/httpload" ./httpload
(cd ../cmd && go build -o "$tmp/faucet" ./faucet)
cat > "$tmp/allow.json" <<'JSON'
{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":1000000,"burst":1000000}}]}
JSON

up=127.0.0.1:39481 px=127.0.0.1:39482 fa=127.0.0.1:39483 fd=127.0.0.1:39484
"$tmp/httpload" upstream --listen $up > /dev/null & pids+=($!); pid_bare=$!
"$tmp/httpload" proxy --listen $px --upstream http://$up > /dev/null & pids+=($!); pid_proxy=$!
"$tmp/faucet" serve --listen $fa --upstream http://$up --rules "$tmp/allow.json" --watch 0 --admin-listen "" 2> /dev/null & pids+=($!); pid_faucet=$!
"$tmp/faucet" serve --listen $fd --upstream http://$up --admin-listen "" 2> /dev/null & pids+=($!); pid_deny=$!
for a in $up $px $fa $fd; do
	for _ in $(seq 100); do curl -s -o /dev/null "http://$a/healthz" && break; sleep 0.1; done
done

{
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "note: rate=$rate req/s open-loop; conns=$conns closed-loop; 5 s measured after 1 s warm-up; $runs rounds, targets interleaved, the order rotated each round; server-cpu = CPU of the process loaded (upstream, proxy or faucet)"
} > "$out"
targets=("bare $up $pid_bare" "proxy $px $pid_proxy" "faucet $fa $pid_faucet" "faucet-deny $fd $pid_deny")
for round in $(seq 0 $((runs - 1))); do
	# Each round starts one target later, so that no target always runs
	# right after the same other one (or first, on a machine just idle).
	for i in 0 1 2 3; do
		set -- ${targets[$(((round + i) % 4))]}
		"$tmp/httpload" run --url "http://$2/x" --name "target=$1/load=rate$rate" --rate "$rate" --pid "$3" | tee -a "$out"
		"$tmp/httpload" run --url "http://$2/x" --name "target=$1/load=conns$conns" --conns "$conns" --pid "$3" | tee -a "$out"
	done
done
# The limiter's own cost per request, without a network.
check=${out%-http.txt}-check.txt
(cd .. && go test -run '^$' -bench '^BenchmarkCheck$' -benchmem -count 10 ./httplimit/) | tee "$check"
echo "wrote $out and $check"
