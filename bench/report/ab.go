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
	fmt.Fprintf(&b, "faucet's own BenchmarkAllow rows at %s and at %s, one test binary per\n", baseline, commit)
	fmt.Fprintf(&b, "commit run alternately 10 times on the same machine (`bench/%s`):\n", filepath.ToSlash(commands))
	fmt.Fprintf(&b, "%s.\n\n```\n%s\n```\n", verdict, strings.TrimSpace(table))
	if slices.ContainsFunc(slower, func(r string) bool { return strings.Contains(r, "scen=par-distinct/mode=allow") }) {
		note, err := sharingNote(dir)
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

// sharingNote explains par-distinct's allow row from the newest
// BenchmarkSharing run (results/<date>-<commit>-sharing.txt, -cpu 1,2), or
// says that no run is there to explain it.
func sharingNote(dir string) (string, error) {
	file, r, err := newest(dir, "-sharing.txt")
	if err != nil || file == "" {
		return "\nNo BenchmarkSharing run is in bench/results to explain scen=par-distinct.\n", err
	}
	// gain is how many times one goroutine's calls per second two
	// goroutines make in a table of n keys.
	gain := func(n string) (float64, error) {
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
			return 0, fmt.Errorf("%s: keys=%s needs rows at -cpu 1 and 2", file, n)
		}
		return one / two, nil
	}
	var g [3]float64
	for i, n := range []string{"2048", "16384", "131072"} {
		if g[i], err = gain(n); err != nil {
			return "", err
		}
	}
	var trend string
	switch {
	case g[0] < g[1] && g[1] < g[2]:
		trend = "and the gain grows as that share falls from a half to a sixteenth to 1/128."
	case g[0] < min(g[1], g[2]):
		trend = `and the gain is least where that share is largest (a half, at
2048 keys); between a sixteenth and 1/128 this run does not tell them
apart.`
	default:
		trend = `and the gain does not follow that share in this run: where the host
places the two vCPUs decides what a line's move costs (see scen=par-hot).`
	}
	return fmt.Sprintf(`
**Why scen=par-distinct allows more slowly.** At %s each bucket was a
24-byte heap object of its own, apart from the index, and objects allocated
one after another sit side by side, so par-distinct's goroutines, each on
1024 keys created one after the other, wrote lines of their own. Now each
bucket is in its index slot, two slots to a 64-byte line, so that a lookup
reads one line (scen=many); slots are placed by hash, and a line may also
hold a key that the other core writes. Such a line moves from core to core on every write to it, and
the chance of one is in proportion to the share of the table's keys the
other core uses. BenchmarkSharing runs par-distinct's loop in tables of
2048, 16384 (par-distinct's) and 131072 keys, on one goroutine and on two
(`+"`bench/%s`"+`):
two goroutines make %.2f×, %.2f× and %.2f× the calls per second of one,
%s A line per bucket would end the sharing at twice the memory per key,
above the 56-byte budget of scen=many.
`, baseline, filepath.ToSlash(file), g[0], g[1], g[2], trend), nil
}
