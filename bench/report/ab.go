package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// baseline is the commit that faucet's BenchmarkAllow rows are held
// against: none may be slower beyond the noise.
const baseline = "f6ea404"

// abSection renders the newest interleaved A/B of faucet's BenchmarkAllow
// rows against the baseline (results/<date>-allow-ab-<commit>.txt, one file
// per commit, and -allow-ab-commands.txt), or "" if there is none.
func abSection(dir string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*-allow-ab-*.txt"))
	sort.Strings(files)
	var base, head, commands string
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, "-commands.txt"):
			commands = f
		case strings.HasSuffix(f, "-"+baseline+".txt"):
			base = f
		default:
			head = f
		}
	}
	if base == "" || head == "" {
		return "", nil
	}
	table, err := benchstat("-filter", ".unit:sec/op", base, head)
	if err != nil {
		return "", err
	}
	commit := strings.TrimSuffix(head[strings.LastIndex(head, "-allow-ab-")+len("-allow-ab-"):], ".txt")
	verdict := "none is slower beyond the noise (p < 0.05)"
	if row := slowerRow(table); row != "" {
		verdict = "**slower: " + row + "**"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## faucet against %s\n\n", baseline)
	fmt.Fprintf(&b, "faucet's own BenchmarkAllow rows at %s and at %s, one test binary per\n", baseline, commit)
	fmt.Fprintf(&b, "commit run alternately 10 times on the same machine (`bench/%s`):\n", filepath.ToSlash(commands))
	fmt.Fprintf(&b, "%s.\n\n```\n%s\n```\n", verdict, strings.TrimSpace(table))
	return b.String(), nil
}

// slowerRow returns the first row of a benchstat table that is
// significantly slower than its base, or "".
func slowerRow(table string) string {
	for _, line := range strings.Split(table, "\n") {
		if i := strings.Index(line, "(p="); i > 0 && strings.Contains(line, "+") && !strings.Contains(line, " ~ ") {
			return strings.Fields(line)[0]
		}
	}
	return ""
}
