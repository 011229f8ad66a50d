package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// scripts are the bench/*.sh scripts other than run.sh: the results files
// they write and the commands they run (from bench/; a command in brackets
// changes directory first).
var scripts = []struct {
	name     string
	suffixes []string
	commands []string
}{
	{"http.sh", []string{"-http.txt", "-check.txt"}, []string{
		"./http.sh    # builds httpload and faucet, loads them; RUNS=8 rounds",
		"(cd .. && go test -run '^$' -bench '^BenchmarkCheck$' -benchmem -count 10 ./httplimit/)",
		"(cd .. && go test -run '^$' -bench '^BenchmarkCheckCold$//^cache=l3$' -benchtime 2000x -benchmem -count 10 ./httplimit/)",
		"(cd .. && go test -run '^$' -bench '^BenchmarkCheckCold$//^cache=dram$' -benchtime 100x -benchmem -count 10 ./httplimit/)",
		"(cd .. && go test -run '^$' -bench '^BenchmarkWriteProblem$' -benchmem -count 10 ./httplimit/)",
	}},
	{"held.sh", []string{"-held.txt"}, []string{
		"(cd .. && go test -run '^$' -bench '^BenchmarkHandlerHeld$' -benchmem -count 10 ./httplimit/)",
		"(cd .. && go test -run '^$' -bench '^BenchmarkDelayWaiting$' -benchtime 1x -count 10 ./httplimit/)",
	}},
	{"redis.sh", []string{"-redis.txt"}, []string{
		"FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkRedis$' -count 10 -timeout 0 .",
		"FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkLeased$' -count 10 -timeout 0 .",
		"FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkRLS$' -count 10 -timeout 0 .",
	}},
	{"postgres.sh", []string{"-postgres.txt"}, []string{
		"FAUCET_REQUIRE_POSTGRES=1 FAUCET_REQUIRE_REDIS=1 go test -run '^$' -bench '^(BenchmarkPostgres|BenchmarkLeasedPostgres)$' -benchtime 1s -count 10 -timeout 0 .",
	}},
	{"audit.sh", []string{"-audit.txt"}, []string{
		"(cd .. && FAUCET_REQUIRE_POSTGRES=1 go test -run '^$' -bench '^BenchmarkDenied$' -count 10 ./pgstore/pgaudit)",
		"(cd .. && FAUCET_REQUIRE_POSTGRES=1 go test -run '^$' -bench '^BenchmarkDeniedAt20k$' -benchtime 40000x -count 10 ./pgstore/pgaudit)",
	}},
	{"sharedload.sh", []string{"-sharedload.txt"}, []string{
		"(cd ../cmd && FAUCET_REQUIRE_POSTGRES=1 FAUCET_REQUIRE_REDIS=1 go test -run '^$' -bench '^BenchmarkSharedHotKey$' -benchtime 1x -count 10 -timeout 0 ./faucet -sharedload-span 8s)",
	}},
	{"adaptive.sh", []string{"-adaptive.txt"}, []string{
		"./adaptive.sh    # builds httpload and faucet; a run per bound on the upstream's queue (QUEUES='65536 100')",
		"httpload capacity --listen UP --schedule 1000,20s=200,50s=1000 --queue Q --start T",
		"faucet serve --listen ADDR --admin-listen ADMIN --upstream http://UP --rules RULES --watch 0 --upstream-timeout 1s --write-timeout 5s",
		"httpload adapt --label queue=Q --target http://ADDR/x --metrics http://ADMIN/metrics --upstream-stats http://UP/stats --start T --warmup 3s --rate 1500 --duration 70s --latency-target 50ms",
	}},
}

// commandsSection lists, script by script, the commands that wrote the
// results the document shows: run.sh's from its -commands.txt (less the
// profiles', which the document does not show), the others' as the
// scripts run them, with redis-benchmark's from its raw output.
func commandsSection(prefix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s\n\n", commandsHeading)
	b.WriteString("From `bench/`. COUNT, RUNS and the like are the scripts' defaults; the sections say how many runs each file holds.\n")
	fmt.Fprintf(&b, "\n### run.sh\n\nRaw output: [`bench/%s-*.txt`](bench/%s/).\n\n", filepath.ToSlash(prefix), filepath.ToSlash(filepath.Dir(prefix)))
	var lines []string
	for line := range strings.Lines(readFile(prefix + "-commands.txt")) {
		if !strings.Contains(line, "-cpuprofile") && !strings.Contains(line, "go tool pprof") {
			lines = append(lines, strings.TrimRight(line, "\n"))
		}
	}
	codeBlock(&b, strings.Join(lines, "\n"))
	dir := filepath.Dir(prefix)
	for _, s := range scripts {
		var files []string
		for _, suf := range s.suffixes {
			if f, _ := newestFile(dir, suf); f != "" {
				files = append(files, f)
			}
		}
		if len(files) == 0 {
			continue
		}
		cmds := s.commands
		if s.name == "redis.sh" {
			files = append(files, rawFile(files[0]))
			cmds = append(cmds, redisBenchmarkCommands(rawFile(files[0]))...)
		}
		var links []string
		for _, f := range files {
			links = append(links, rawLink(f))
		}
		fmt.Fprintf(&b, "\n### %s\n\nRaw output: %s.\n\n", s.name, strings.Join(links, ", "))
		codeBlock(&b, strings.Join(cmds, "\n"))
	}
	return b.String()
}

// redisBenchmarkCommands are the distinct redis-benchmark commands in
// redis.sh's raw output, each once.
func redisBenchmarkCommands(raw string) []string {
	var out []string
	for line := range strings.SplitSeq(readFile(raw), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok && !slices.Contains(out, cmd) {
			out = append(out, cmd)
		}
	}
	return out
}

// machineSection is run.sh's -meta.txt, and for every other results file
// the CPU, the servers and the load average its script recorded.
func machineSection(prefix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s\n\n", machineHeading)
	fmt.Fprintf(&b, "run.sh (%s):\n\n", rawLink(prefix+"-meta.txt"))
	codeBlock(&b, readFile(prefix+"-meta.txt"))
	b.WriteString("\n| raw output | cpu | servers | load average at start → end |\n|---|---|---|---|\n")
	var notes []string
	dir := filepath.Dir(prefix)
	for _, s := range scripts {
		for _, suf := range s.suffixes {
			f, r := newestFile(dir, suf)
			if f == "" || r == nil {
				continue
			}
			var servers []string
			for _, k := range []string{"postgres", "redis"} {
				if v := r.config[k]; v != "" {
					servers = append(servers, k+" "+v)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", rawLink(f), dash(r.config["cpu"]), dash(strings.Join(servers, ", ")), dash(loadAverages(f)))
			if n := r.config["note"]; n != "" {
				notes = append(notes, fmt.Sprintf("- %s: %s", rawLink(f), n))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nThe notes the scripts recorded:\n\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// newestFile is newest without the error: a file that does not parse
// shows in the section that reads it.
func newestFile(dir, suffix string) (string, *results) {
	f, r, err := newest(dir, suffix)
	if err != nil {
		if _, statErr := os.Stat(f); statErr != nil {
			return "", nil
		}
	}
	return f, r
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
