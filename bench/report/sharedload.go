package main

import (
	"fmt"
	"slices"
	"strings"
)

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
	section(&b, 2, sharedHeading, file)
	fmt.Fprintf(&b, "PostgreSQL %s, redis-server %s, %s per run. Medians of %d runs, the worst run in brackets.\n\n",
		r.config["postgres"], r.config["redis"], spanOf(r), runs)
	b.WriteString("| store | mode | checks/s | admitted | bound | admitted ÷ bound | share of the rate | store errors |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range all {
		v := s.values
		if len(v["admitted"]) == 0 {
			continue
		}
		ofBound, ofRate, errs := v["pct-of-bound"], v["pct-of-rate"], v["store-errors"]
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.1f %% (%.1f %%) | %.1f %% (%.1f %%) | %.0f (%.0f) |\n",
			s.config["store"], s.config["mode"], median(v["checks/s"]), median(v["admitted"]), median(v["bound"]),
			median(ofBound), slices.Max(ofBound), median(ofRate), slices.Min(ofRate), median(errs), slices.Max(errs))
	}
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
