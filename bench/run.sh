#!/usr/bin/env bash
# Runs the in-process benchmarks that BENCHMARKS.md reports, 10 times each,
# stores the raw output under results/ and regenerates ../BENCHMARKS.md and
# the summary table in ../README.md from it and from the newest results of
# the other scripts (http.sh, httpprofile.sh, redis.sh, postgres.sh,
# audit.sh, sharedload.sh, adaptive.sh).
# Takes about an hour and a half on 2 cores; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")"

commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- .. ; then
	commit="$commit-dirty"
fi
prefix="results/$(date -u +%Y-%m-%d)-$commit"
mkdir -p results
: > "$prefix-commands.txt"

run() { # run <name> <command...>: record the command, tee its output
	local name=$1; shift
	echo "$*" >> "$prefix-commands.txt"
	"$@" | tee "$prefix-$name.txt"
}

{
	echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "cores:   $(nproc)"
	echo "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "os:      $(uname -sr)"
	echo "go:      $(go version)"
	echo "commit:  $commit"
	echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
} > "$prefix-meta.txt"

run allow go test -run '^$' -bench '^BenchmarkAllow$' -benchmem -count 10 -timeout 0 .
run memory go test -run '^$' -bench '^BenchmarkMemory$' -count 10 -timeout 0 .
best=$(go run ./report -prefix "$prefix" -best 2)
first=${best%%,*}
run scaling go test -run '^$' -bench '^BenchmarkScaling$' -benchmem -count 10 -timeout 0 -scaling="faucet,$best" .
run tail go test -run '^$' -bench '^BenchmarkTail$' -count 10 -timeout 0 -scaling="faucet,$first" .
run sweep go test -run '^$' -bench '^BenchmarkSweep' -count 10 -timeout 0 .
run cost go test -run '^$' -bench '^BenchmarkCost$' -count 10 -timeout 0 .

# CPU profiles of faucet's own rows, kept beside the results. Only
# samples under Engine.Allow count, so a scenario's setup (creating 1e6 keys)
# does not crowd out the calls it times.
for scen in hot many par-distinct par-hot; do
	echo "go test -run '^\$' -bench 'BenchmarkAllow/impl=faucet/scen=$scen/mode=allow\$' -benchtime 3s -cpuprofile cpu-$scen.prof -o bench.test ." >> "$prefix-commands.txt"
	echo "go tool pprof -top -nodecount=18 -focus 'Engine..Allow$' bench.test cpu-$scen.prof" >> "$prefix-commands.txt"
	go test -run '^$' -bench "BenchmarkAllow/impl=faucet/scen=$scen/mode=allow\$" -benchtime 3s \
		-cpuprofile "cpu-$scen.prof" -o bench.test . > /dev/null
	go tool pprof -top -nodecount=18 -focus 'Engine..Allow$' bench.test "cpu-$scen.prof" 2>/dev/null |
		sed -n '/flat%/,$p' > "$prefix-profile-$scen.txt"
	rm -f "cpu-$scen.prof"
done
rm -f bench.test

go run ./report -prefix "$prefix" -out ../BENCHMARKS.md -readme ../README.md
echo "wrote ../BENCHMARKS.md and README.md's summary from $prefix-*"
