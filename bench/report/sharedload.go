package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// sharedRateTarget is the least share of the rate a shared limit should
// admit under a hot key, in percent of rate × span.
const sharedRateTarget = 95

// sharedloadSection renders BenchmarkSharedHotKey from the newest
// results/*-sharedload.txt (bench/sharedload.sh), or "" if there is none.
func sharedloadSection(dir string) (string, error) {
	file, r, err := newest(dir, "-sharedload.txt")
	if file == "" || err != nil {
		return "", err
	}
	all := r.find("bench", "SharedHotKey")
	if len(all) == 0 {
		return "", nil
	}
	runs := len(all[0].values["admitted"])

	var b strings.Builder
	b.WriteString("\n## A shared limit under a hot key\n\n")
	b.WriteString("`bench/sharedload.sh` runs `BenchmarkSharedHotKey` (in `cmd/faucet`): four\n")
	b.WriteString("`faucet serve` instances on one store, sixteen clients per instance, each\n")
	b.WriteString("with its own keep-alive connection, posting checks on one API key to the check\n")
	b.WriteString("API as fast as they can, under one rule of 100/s with a burst of 100 (default\n")
	fmt.Fprintf(&b, "fail_mode), for %s. The stores are a local PostgreSQL %s (fsync off,\n", spanOf(r), r.config["postgres"])
	fmt.Fprintf(&b, "UNLOGGED table) and a local redis-server %s; `check` calls the store per\n", r.config["redis"])
	b.WriteString("check, `lease` decides from leases (`--lease`). One limit admits at most its\n")
	b.WriteString("burst plus the rate over the span, measured from the first check's send to the\n")
	b.WriteString("last check's reply: the bound. A store call that fails or misses its deadline\n")
	b.WriteString("(100 ms) is decided by the instance's in-memory fallback at a quarter of the\n")
	b.WriteString("limit, so store errors show as admissions above the bound, and the target is\n")
	fmt.Fprintf(&b, "none. The share of the rate is admitted ÷ (rate × span); the target is at least %d %%\n", sharedRateTarget)
	b.WriteString("(the burst counts in it). The store, the instances and the clients share the\n")
	fmt.Fprintf(&b, "machine's cores. Medians of %d runs (worst run in brackets) in `bench/%s`%s.\n\n",
		runs, filepath.ToSlash(file), loadNote(file))

	b.WriteString("| store | mode | checks/s | admitted | bound | admitted ÷ bound | share of the rate | store errors | within the bound | rate target met |\n|---|---|---|---|---|---|---|---|---|---|\n")
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	for _, s := range all {
		v := s.values
		if len(v["admitted"]) == 0 {
			continue
		}
		ofBound, ofRate, errs := v["pct-of-bound"], v["pct-of-rate"], v["store-errors"]
		worstBound, worstRate, mostErrs := slices.Max(ofBound), slices.Min(ofRate), slices.Max(errs)
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.1f %% (%.1f %%) | %.1f %% (%.1f %%) | %.0f (%.0f) | %s | %s |\n",
			s.config["store"], s.config["mode"], median(v["checks/s"]), median(v["admitted"]), median(v["bound"]),
			median(ofBound), worstBound, median(ofRate), worstRate, median(errs), mostErrs,
			met(worstBound <= 100), met(worstRate >= sharedRateTarget))
	}
	b.WriteString("\nReproduce: `cd bench && ./sharedload.sh` (COUNT=10 runs of each). From `cmd/` it runs\n\n```\n")
	b.WriteString("go test -run '^$' -bench '^BenchmarkSharedHotKey$' -benchtime 1x -count 10 -timeout 0 ./faucet\n```\n")
	return b.String(), nil
}

// spanOf is the span of each run from the results file's note ("..., 8s
// per run; ..."), or "8 s" without one.
func spanOf(r *results) string {
	for f := range strings.SplitSeq(r.config["note"], ",") {
		if s, _, ok := strings.Cut(strings.TrimSpace(f), " per run"); ok {
			return s
		}
	}
	return "8 s"
}
