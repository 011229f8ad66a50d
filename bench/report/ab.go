package main

import (
	"fmt"
	"path/filepath"
	"slices"
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
	slower := slowerRows(table)
	if len(slower) > 0 {
		verdict = "**slower: " + strings.Join(slower, ", ") + "**"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## faucet against %s\n\n", baseline)
	fmt.Fprintf(&b, "faucet's own BenchmarkAllow rows, and BenchmarkKeyOrder and BenchmarkSharing if\n")
	fmt.Fprintf(&b, "the run has them, at %s and at %s, one test binary per commit run\n", baseline, commit)
	fmt.Fprintf(&b, "alternately 10 times on the same machine (`bench/%s`):\n", filepath.ToSlash(commands))
	fmt.Fprintf(&b, "%s.\n\n```\n%s\n```\n", verdict, strings.TrimSpace(table))
	if slices.ContainsFunc(slower, func(r string) bool {
		return strings.Contains(r, "scen=par-distinct/") || strings.HasPrefix(r, "Sharing/")
	}) {
		note, err := sharingNote(base, head, commit)
		if err != nil {
			return "", err
		}
		b.WriteString(note)
	}
	return b.String(), nil
}

// slowerRows returns the rows of a benchstat table that are significantly
// slower than their base, each with its change.
func slowerRows(table string) []string {
	var out []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.Contains(line, "(p=") || strings.Contains(line, " ~ ") {
			continue
		}
		f := strings.Fields(line)
		for _, x := range f[1:] {
			if strings.HasPrefix(x, "+") && strings.HasSuffix(x, "%") {
				out = append(out, f[0]+" ("+x+")")
			}
		}
	}
	return out
}

// sharingNote explains par-distinct's and BenchmarkSharing's slower rows
// from the A/B's own BenchmarkSharing rows (run at -cpu 1,2 for both
// commits), or says that the A/B has none.
func sharingNote(baseFile, headFile, commit string) (string, error) {
	var gains [2][3]float64 // [commit][table size]: two goroutines' calls per second over one's
	for c, file := range []string{baseFile, headFile} {
		r, err := load(file)
		if err != nil {
			return "", err
		}
		for i, n := range []string{"2048", "16384", "131072"} {
			var one, two float64
			for _, s := range r.find("bench", "Sharing", "impl", "faucet", "keys", n) {
				switch s.procs {
				case 0, 1:
					one = median(s.values["sec/op"])
				case 2:
					two = median(s.values["sec/op"])
				}
			}
			if one == 0 || two == 0 {
				return "\nThe A/B has no BenchmarkSharing rows at -cpu 1 and 2 to explain the rows above.\n", nil
			}
			gains[c][i] = one / two
		}
	}
	loss := func(i int) float64 { return gains[0][i] / gains[1][i] }
	trend := "the loss shrinks as that share falls."
	if !(loss(0) > loss(1) && loss(1) > loss(2)) {
		trend = `this run does not order the losses by that share: where the host
places the two vCPUs decides what a line's move costs (see scen=par-hot).`
	}
	return fmt.Sprintf(`
**Why two cores gain less now.** At %s each bucket was a 24-byte heap
object of its own, apart from the index, and objects allocated one after
another sit side by side, so par-distinct's goroutines, each on 1024 keys
created one after the other, wrote lines of their own. Now each bucket is
in its index slot, two slots to a 64-byte line, so that a lookup reads one
line (scen=many); slots are placed by hash, and a line may also hold a key
the other core writes, which then moves from core to core on every write
to it. The chance of such a line is in proportion to the share of the
table's keys the other core uses: a half, a sixteenth and 1/128 in
BenchmarkSharing, which runs par-distinct's loop in tables of 2048, 16384
(par-distinct's) and 131072 keys, on one goroutine and on two. Two
goroutines make %.2f×, %.2f× and %.2f× the calls per second of one
at %s, and %.2f×, %.2f× and %.2f× at %s;
%s Two slots per line are what keeps a lookup to one line within
scen=many's 56-byte budget per key; a line per bucket would end the sharing
at twice the memory.
`, baseline, gains[0][0], gains[0][1], gains[0][2], baseline,
		gains[1][0], gains[1][1], gains[1][2], commit, trend), nil
}
