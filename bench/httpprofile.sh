#!/usr/bin/env bash
# Where faucet serve's CPU time goes on loopback: perf record samples serve
# while httpload loads it over 16 connections, once with a per-IP rule that
# never binds (allow) and once with the built-in 5 rps rule, which denies
# almost every request (deny), the two targets of bench/http.sh. For each,
# writes the httpload line measured meanwhile, the frames with the largest
# share of the samples (children: the frame and what it calls; self: the
# frame alone), and the same for the frames of the HTTP server, the proxy,
# faucet's packages and the allocator (selected below), to
# results/<date>-<commit>-http-profile.txt or the file given. bench/report
# compares the selected frames of the oldest and the newest such files.
#
# ENGINE=fasthttp profiles serve with its public listener on fasthttp
# (--http-engine fasthttp) instead of net/http (ENGINE=nethttp, the
# default), into results/<date>-<commit>-http-profile-fasthttp.txt, a name
# the net/http profiles' comparison does not pick up; bench/report shows
# the newest such file on its own.
#
# Needs perf (Debian: apt-get install linux-perf). Kernel frames, a large
# share of serve's samples, need root or kernel.perf_event_paranoid <= 1
# (sysctl -w kernel.perf_event_paranoid=1): without them the shares would
# not compare with other profiles, so the script refuses. Takes about 30 s.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v perf > /dev/null; then
	echo "httpprofile.sh: perf is not installed (Debian: apt-get install linux-perf)" >&2
	exit 1
fi
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2> /dev/null || echo 2)
if [ "$(id -u)" -ne 0 ] && [ "$paranoid" -gt 1 ]; then
	echo "httpprofile.sh: kernel.perf_event_paranoid is $paranoid, so perf would sample no kernel frames;" >&2
	echo "run as root, or first: sudo sysctl -w kernel.perf_event_paranoid=1" >&2
	exit 1
fi
engine=${ENGINE:-nethttp}
# The default passes no flag, so that it profiles a serve built without
# --http-engine too.
case $engine in
nethttp) engine_flag=() suffix="" ;;
fasthttp) engine_flag=(--http-engine fasthttp) suffix=-fasthttp ;;
*)
	echo "httpprofile.sh: ENGINE is \"$engine\"; want nethttp or fasthttp" >&2
	exit 1
	;;
esac
commit=$(git rev-parse --short HEAD)
out=${1:-results/$(date -u +%Y-%m-%d)-$commit-http-profile$suffix.txt}
conns=16
sampled=10 # seconds perf samples, inside the load's
top=25     # lines of top frames
least=0.2  # the smallest share of a selected frame listed, in percent
# The selected frames, by symbol: the HTTP server's and the transport's work
# on a request (net/http's, and fasthttp's serving a connection, reading a
# request and writing a response), the proxies, faucet's own packages, the
# allocator, the collector and the system call entry. Each engine's frames
# are absent from the other's profile.
selected=(
	'net/http\.\(\*response\)\.finishRequest'
	'net/http\.\(\*conn\)\.readRequest'
	'net/http\.\(\*persistConn\)\.(readLoop|writeLoop)'
	'net/http/httputil\.\(\*ReverseProxy\)\.ServeHTTP'
	'github\.com/valyala/fasthttp\.\(\*Server\)\.serveConnCounted'
	'github\.com/valyala/fasthttp\.\(\*Request\)\.readLimitBody'
	'github\.com/valyala/fasthttp\.writeResponse'
	'github\.com/faucetgo/faucet/(httplimit|engine|cmd/internal/conncap)\..*'
	'github\.com/faucetgo/faucet/cmd/internal/httpserve\.\(\*(directProxy|fastProxy|fastExchange|requestView|fastWriter)\)\..*'
	'github\.com/faucetgo/faucet/cmd/internal/httpserve\.(copyFields|PublicFast\.fastHandler\.func.*)'
	'runtime\.mallocgc.*'
	'runtime\.gcBgMarkWorker'
	'syscall\.Syscall'
)
pattern=$(IFS='|'; echo "${selected[*]}")
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; wait 2> /dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# perf itself may be refused (a container's seccomp profile, say).
if ! perf record -e cpu-clock -o "$tmp/check.data" -- true > /dev/null 2> "$tmp/check.log"; then
	echo "httpprofile.sh: perf record does not run here:" >&2
	cat "$tmp/check.log" >&2
	exit 1
fi

go build -o "$tmp/httpload" ./httpload
(cd ../cmd && go build -o "$tmp/faucet" ./faucet)
cat > "$tmp/allow.json" << 'JSON'
{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":1000000,"burst":1000000}}]}
JSON

# Ports apart from http.sh's, below Linux's ephemeral ports.
up=127.0.0.1:29491 fa=127.0.0.1:29492 fd=127.0.0.1:29493
"$tmp/httpload" upstream --listen $up > /dev/null & pids+=($!)
"$tmp/faucet" serve --listen $fa --upstream http://$up --rules "$tmp/allow.json" --watch 0 --admin-listen "" "${engine_flag[@]}" 2> /dev/null & pids+=($!); pid_faucet=$!
"$tmp/faucet" serve --listen $fd --upstream http://$up --admin-listen "" "${engine_flag[@]}" 2> /dev/null & pids+=($!); pid_deny=$!
# A serve that exited (refusing its flags, say) would be sampled as nothing.
for a in $up $fa $fd; do
	answered=""
	for _ in $(seq 100); do curl -s -o /dev/null "http://$a/healthz" && answered=1 && break; sleep 0.1; done
	if [ -z "$answered" ]; then
		echo "httpprofile.sh: nothing answers on $a after 10 s" >&2
		exit 1
	fi
done

# frames lists perf's report of samples as lines of children and self, in
# percent, and the symbol, largest children first: the top ones, or with
# -s the selected ones down to the least share.
frames() { # data [-s]
	perf report -i "$1" --children --stdio --sort sym -g none 2> /dev/null |
		grep -E '^ +[0-9.]+% +[0-9.]+% ' | sed -E 's/^ +//; s/ +/ /g' |
		if [ "${2:-}" = -s ]; then
			grep -E "\] ($pattern)\$" | awk -v least="$least" '$1 + 0 >= least' || true
		else
			awk -v n="$top" 'NR <= n'
		fi
}

# profile loads target name at url while perf samples process pid, and
# writes its part of the file under heading.
profile() { # name url pid heading
	"$tmp/httpload" run --target "$1=$2,$3" --conns $conns --warmup 1s --duration $((sampled + 2))s > "$tmp/$1.txt" &
	local load=$!
	sleep 2
	perf record -e cpu-clock -F 999 -g -p "$3" -o "$tmp/$1.data" -- sleep $sampled 2> "$tmp/$1.log" > /dev/null
	wait $load
	echo
	echo "## $4"
	sed 's/^/# /' "$tmp/$1.txt"
	echo "# top frames"
	frames "$tmp/$1.data"
	echo "# selected frames"
	frames "$tmp/$1.data" -s
}

{
	echo "# perf record -e cpu-clock -F 999 -g -p <faucet serve> -- sleep $sampled, under httpload run --conns $conns (bench/http.sh's rules; bench/httpprofile.sh)"
	echo "# faucet serve built at $commit${engine_flag[*]:+ with ${engine_flag[*]}}; share of samples, cumulative (children) then flat (self); selected frames down to $least %"
	echo "# recorded $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	profile "faucet$suffix" "http://$fa/x" $pid_faucet "allow (per-ip rule that never binds)"
	profile "faucet$suffix-deny" "http://$fd/x" $pid_deny "deny (built-in 5 rps rule: nearly every request a 429)"
} > "$tmp/profile.txt"
mv "$tmp/profile.txt" "$out"
echo "wrote $out"
