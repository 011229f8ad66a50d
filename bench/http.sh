#!/usr/bin/env bash
# Load test of faucet serve on loopback: requests/s and latency percentiles
# straight to an upstream, through a plain reverse proxy, and through faucet
# serve (a per-IP rule that never binds, and the built-in 5 rps rule that
# denies almost everything), every process separate, with the CPU time the
# front process spends per request. A second plain proxy, identical to the
# first, measures the noise: what proxy2 differs from proxy by, faucet may
# differ by without costing anything. proxy-linked is the plain proxy built
# with the libraries faucet serve links (httpload/linked.go): how far it is
# from proxy is the cost of serve's weight alone, before serve does anything.
# go-429 is a bare Go server (httpload deny) that answers every request with
# the 429 faucet-deny writes, the same header fields and body, pre-rendered,
# with no limiter: the floor under serve's denial, what a server on
# net/http cannot answer a 429 for less than. fasthttp-429 does the same on
# fasthttp (httpload fastdeny), and fasthttp-proxy (httpload fastproxy) is
# a proxy on fasthttp that only adds X-Forwarded-For: what another Go HTTP
# engine costs for the same two jobs. faucet-fasthttp and faucet-fasthttp-deny
# are faucet and faucet-deny with serve's public listener on fasthttp
# (--http-engine fasthttp) instead of net/http.
# With nginx installed (Debian's package), NGINX as a plain reverse proxy
# (nginx), with a limit_req zone that never binds (nginx-limit) and with one
# of 5 r/s per address that denies almost everything (nginx-deny), the
# limiter a team at the edge would otherwise keep: 2 workers, keep-alive to
# the upstream, no access log; its CPU time is the master's and the
# workers' summed.
# Writes Go benchmark lines to the file given (default
# results/<date>-<commit>-http.txt), and httplimit's BenchmarkCheck,
# BenchmarkCheckCold and BenchmarkWriteProblem beside it (-check.txt). Takes about 10 minutes
# (RUNS=8 rounds).
set -euo pipefail
cd "$(dirname "$0")"
commit=$(git rev-parse --short HEAD)
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-http.txt}
runs=${RUNS:-8}
rate=${RATE:-2000}
conns=${CONNS:-16 64}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/httpload" ./httpload
go build -tags linked -o "$tmp/httpload-linked" ./httpload
(cd ../cmd && go build -o "$tmp/faucet" ./faucet)
cat > "$tmp/allow.json" <<'JSON'
{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":1000000,"burst":1000000}}]}
JSON

# Below Linux's ephemeral ports (32768 and up), which outgoing connections
# take.
up=127.0.0.1:29481 px=127.0.0.1:29482 fa=127.0.0.1:29483 fd=127.0.0.1:29484 px2=127.0.0.1:29485 pl=127.0.0.1:29486 g4=127.0.0.1:29490 f4=127.0.0.1:29494 fp=127.0.0.1:29495
ffa=127.0.0.1:29496 ffd=127.0.0.1:29497
"$tmp/httpload" upstream --listen $up > /dev/null & pids+=($!); pid_bare=$!
"$tmp/httpload" proxy --listen $px --upstream http://$up > /dev/null & pids+=($!); pid_proxy=$!
"$tmp/httpload" proxy --listen $px2 --upstream http://$up > /dev/null & pids+=($!); pid_proxy2=$!
"$tmp/httpload-linked" proxy --listen $pl --upstream http://$up > /dev/null & pids+=($!); pid_linked=$!
"$tmp/faucet" serve --listen $fa --upstream http://$up --rules "$tmp/allow.json" --watch 0 --admin-listen "" 2> /dev/null & pids+=($!); pid_faucet=$!
"$tmp/faucet" serve --listen $fd --upstream http://$up --admin-listen "" 2> /dev/null & pids+=($!); pid_deny=$!
"$tmp/faucet" serve --http-engine fasthttp --listen $ffa --upstream http://$up --rules "$tmp/allow.json" --watch 0 --admin-listen "" 2> /dev/null & pids+=($!); pid_fasthttp=$!
"$tmp/faucet" serve --http-engine fasthttp --listen $ffd --upstream http://$up --admin-listen "" 2> /dev/null & pids+=($!); pid_fasthttp_deny=$!
"$tmp/httpload" deny --listen $g4 > /dev/null & pids+=($!); pid_go429=$!
"$tmp/httpload" fastdeny --listen $f4 > /dev/null & pids+=($!); pid_fast429=$!
"$tmp/httpload" fastproxy --listen $fp --upstream http://$up > /dev/null & pids+=($!); pid_fastproxy=$!
ng=127.0.0.1:29487 ngl=127.0.0.1:29488 ngd=127.0.0.1:29489
nginx_targets=()
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
	nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
	# One NGINX per target, so that each one's CPU time is its own.
	start_nginx() { # name listen limit_req-directive
		local d="$tmp/nginx-$1"
		mkdir -p "$d"
		cat > "$d/nginx.conf" <<CONF
worker_processes 2;
pid $d/nginx.pid;
error_log $d/error.log warn;
daemon off;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $d/body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	uwsgi_temp_path $d/uwsgi;
	scgi_temp_path $d/scgi;
	upstream up { server $up; keepalive 64; }
	limit_req_zone \$binary_remote_addr zone=never:10m rate=1000000r/s;
	limit_req_zone \$binary_remote_addr zone=deny:10m rate=5r/s;
	limit_req_status 429;
	proxy_http_version 1.1;
	proxy_set_header Connection "";
	server { listen $2; location / { $3 proxy_pass http://up; } }
}
CONF
		"$nginx_bin" -c "$d/nginx.conf" -p "$d" 2> /dev/null &
		pids+=($!)
		local master=$! workers=""
		# Both workers, or a target's CPU would be half counted.
		for _ in $(seq 100); do
			workers=$(pgrep -P "$master" | paste -sd+ || true)
			[ "$(echo "$workers" | tr + '\n' | grep -c .)" -ge 2 ] && break
			sleep 0.1
		done
		if [ "$(echo "$workers" | tr + '\n' | grep -c .)" -lt 2 ]; then
			echo "http.sh: NGINX $1 started $workers, not 2 workers" >&2
			exit 1
		fi
		nginx_targets+=("$1=http://$2/x,$master${workers:++$workers}")
	}
	start_nginx nginx $ng ""
	start_nginx nginx-limit $ngl "limit_req zone=never burst=1000000 nodelay;"
	start_nginx nginx-deny $ngd "limit_req zone=deny burst=10 nodelay;"
	nginx_version=$("$nginx_bin" -v 2>&1 | sed 's#.*/##')
else
	echo "nginx is not installed (apt-get install -y nginx): no NGINX rows" >&2
fi
# Every target must answer before the load starts: one that exited (a
# faucet serve refusing its flags, say) would be loaded as a closed port.
for a in $up $px $fa $fd $ffa $ffd $px2 $pl $g4 $f4 $fp ${nginx_targets[@]:+$ng $ngl $ngd}; do
	answered=""
	for _ in $(seq 100); do curl -s -o /dev/null "http://$a/healthz" && answered=1 && break; sleep 0.1; done
	if [ -z "$answered" ]; then
		echo "http.sh: nothing answers on $a after 10 s" >&2
		exit 1
	fi
done

{
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	[ -n "${nginx_version:-}" ] && echo "server: nginx $nginx_version"
	echo "note: rate=$rate req/s open-loop; conns=${conns// /, } closed-loop; each round loads proxy, proxy2, proxy-linked, faucet, faucet-deny, faucet-fasthttp, faucet-fasthttp-deny, go-429, fasthttp-429, fasthttp-proxy${nginx_version:+ and the three NGINX targets} in turn, 250 ms each, for 25 s after a 1 s warm-up (25 s shared among the targets), the order rotated each round, and bare (the upstream, which the others load too) in a run of its own, 5 s after 1 s; $runs rounds; server-cpu = CPU time of the process loaded (upstream, proxy or faucet), from its kernel CPU clock; proxy2 is a second plain proxy, to measure the noise; proxy-linked is the plain proxy built with the libraries faucet serve links; go-429 is a bare Go server answering every request with faucet-deny's 429 (the same header fields and body, pre-rendered, no limiter), the floor under faucet-deny; fasthttp-429 is the same on fasthttp, and fasthttp-proxy a proxy on fasthttp that only adds X-Forwarded-For: what the HTTP engine alone costs; faucet-fasthttp and faucet-fasthttp-deny are faucet and faucet-deny with --http-engine fasthttp, serve's public listener on fasthttp instead of net/http${nginx_version:+; nginx, nginx-limit and nginx-deny are NGINX $nginx_version with 2 workers: a plain proxy, limit_req that never binds, limit_req of 5 r/s per address (burst 10, 429), each its own NGINX, whose CPU is its master's and workers' summed}"
} > "$out"
targets=("proxy=http://$px/x,$pid_proxy" "faucet=http://$fa/x,$pid_faucet" "faucet-deny=http://$fd/x,$pid_deny" "proxy2=http://$px2/x,$pid_proxy2" "proxy-linked=http://$pl/x,$pid_linked" "go-429=http://$g4/x,$pid_go429" "fasthttp-429=http://$f4/x,$pid_fast429" "fasthttp-proxy=http://$fp/x,$pid_fastproxy" "faucet-fasthttp=http://$ffa/x,$pid_fasthttp" "faucet-fasthttp-deny=http://$ffd/x,$pid_fasthttp_deny" "${nginx_targets[@]}")
bare() {
	"$tmp/httpload" run --target "bare=http://$up/x,$pid_bare" --rate "$rate" | tee -a "$out"
	for c in $conns; do
		"$tmp/httpload" run --target "bare=http://$up/x,$pid_bare" --conns "$c" | tee -a "$out"
	done
}
for round in $(seq 0 $((runs - 1))); do
	# The targets take turns a slice at a time, so that whatever else the
	# machine runs falls on all of them alike; each round starts one
	# target later. The upstream serves the others' requests too, so its
	# CPU time per request is measured while it is loaded alone, before
	# them in one round, after them in the next.
	if ((round % 2 == 0)); then bare; fi
	args=()
	n=${#targets[@]}
	for i in $(seq 0 $((n - 1))); do
		args+=(--target "${targets[$(((round + i) % n))]}")
	done
	"$tmp/httpload" run "${args[@]}" --rate "$rate" --duration 25s | tee -a "$out"
	for c in $conns; do
		"$tmp/httpload" run "${args[@]}" --conns "$c" --duration 25s | tee -a "$out"
	done
	if ((round % 2 == 1)); then bare; fi
done
# The limiter's own cost per request, without a network: in a tight loop,
# and with the caches emptied before each request (a fixed count, as
# emptying them takes far longer than the request).
check=${out%-http.txt}-check.txt
(cd .. && go test -run '^$' -bench '^BenchmarkCheck$' -benchmem -count 10 ./httplimit/) | tee "$check"
(cd .. && go test -run '^$' -bench '^BenchmarkCheckCold$//^cache=l3$' -benchtime 2000x -benchmem -count 10 ./httplimit/) | grep '^Benchmark' | tee -a "$check"
(cd .. && go test -run '^$' -bench '^BenchmarkCheckCold$//^cache=dram$' -benchtime 100x -benchmem -count 10 ./httplimit/) | grep '^Benchmark' | tee -a "$check"
# serve's handler on its own (the limiter and the proxy, no HTTP server):
# its allocations per request, admitted either way and denied; and the
# fasthttp engine's proxy alone.
(cd ../cmd && go test -run '^$' -bench '^(BenchmarkPublic|BenchmarkPublicFast|BenchmarkFastProxy)$' -benchmem -count 10 ./internal/httpserve/) | grep '^Benchmark' | tee -a "$check"
# What writing a denial's 429 costs, once decided.
(cd .. && go test -run '^$' -bench '^BenchmarkWriteProblem$' -benchmem -count 10 ./httplimit/) | grep '^Benchmark' | tee -a "$check"
echo "wrote $out and $check"
