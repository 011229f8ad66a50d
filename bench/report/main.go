// Command report writes BENCHMARKS.md from the raw go test output that
// bench/run.sh and the other bench/*.sh scripts stored under bench/results,
// and draws its charts. It never runs a benchmark itself, so the document
// always matches committed data. With -readme it also writes the summary
// table into README.md, between the markers it finds there.
//
//	go run ./report -prefix results/2026-11-22-abc1234 -out ../BENCHMARKS.md -readme ../README.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/perf/benchfmt"
)

func main() {
	prefix := flag.String("prefix", "", "results file prefix, e.g. results/2026-11-22-abc1234")
	out := flag.String("out", "../BENCHMARKS.md", "document to write")
	readme := flag.String("readme", "", "also write the summary table into this file, between "+beginMarker+" and "+endMarker)
	best := flag.Int("best", 0, "only print the names of the N fastest keyed peers in scen=many/mode=allow, and exit")
	flag.Parse()
	if *prefix == "" {
		fmt.Fprintln(os.Stderr, "report: -prefix is required")
		os.Exit(2)
	}
	if *best > 0 {
		res, err := load(*prefix + "-allow.txt")
		check(err)
		fmt.Println(strings.Join(fastestPeers(res, "many", "allow", *best), ","))
		return
	}
	sum, err := summarize(*prefix)
	check(err)
	doc, err := render(*prefix, sum)
	check(err)
	check(os.WriteFile(*out, doc, 0o644))
	if *readme != "" {
		check(writeSummary(*readme, *out, sum))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// sample is every measurement of one benchmark configuration.
type sample struct {
	config map[string]string // impl, scen, mode, keys, ... from the name
	procs  int
	values map[string][]float64 // unit -> one value per run
}

type results struct {
	samples map[string]*sample // by full name
	order   []string
	config  map[string]string // file-level keys: goos, cpu, ...
}

func load(path string) (*results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &results{samples: map[string]*sample{}, config: map[string]string{}}
	rd := benchfmt.NewReader(f, path)
	for rd.Scan() {
		switch rec := rd.Result(); rec := rec.(type) {
		case *benchfmt.Result:
			for _, c := range rec.Config {
				r.config[c.Key] = string(c.Value)
			}
			name := string(rec.Name)
			s := r.samples[name]
			if s == nil {
				base, parts := rec.Name.Parts()
				_ = base
				s = &sample{config: map[string]string{}, values: map[string][]float64{}}
				for _, p := range parts {
					k, v, ok := strings.Cut(strings.TrimPrefix(string(p), "/"), "=")
					if ok {
						s.config[k] = v
					} else if strings.HasPrefix(string(p), "-") {
						fmt.Sscanf(string(p), "-%d", &s.procs)
					}
				}
				s.config["bench"] = string(base)
				r.samples[name] = s
				r.order = append(r.order, name)
			}
			for _, v := range rec.Values {
				s.values[v.Unit] = append(s.values[v.Unit], v.Value)
			}
		case *benchfmt.SyntaxError:
			return nil, rec
		}
	}
	return r, rd.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// find returns the samples whose config matches every given key=value.
func (r *results) find(kv ...string) []*sample {
	var out []*sample
	for _, name := range r.order {
		s := r.samples[name]
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if s.config[kv[i]] != kv[i+1] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func (r *results) medianOf(unit string, kv ...string) (float64, bool) {
	ss := r.find(kv...)
	if len(ss) != 1 || len(ss[0].values[unit]) == 0 {
		return 0, false
	}
	return median(ss[0].values[unit]), true
}

// impls lists the implementations that ran the benchmarks matching kv, in
// file order.
func (r *results) impls(kv ...string) []string { return r.distinct("impl", kv...) }

// distinct returns the values of config key among the results that match
// kv, in the order they first appear.
func (r *results) distinct(key string, kv ...string) []string {
	var out []string
	for _, s := range r.find(kv...) {
		if !slices.Contains(out, s.config[key]) {
			out = append(out, s.config[key])
		}
	}
	return out
}

// fastestPeers returns the n keyed peers with the lowest median sec/op. A
// peer is keyed if it ran scen=many (the harness runs unkeyed libraries only
// on one key); faucet's own variants are not peers.
func fastestPeers(r *results, scen, mode string, n int) []string {
	type kv struct {
		name string
		v    float64
	}
	keyed := r.impls("bench", "Allow", "scen", "many")
	var all []kv
	for _, im := range r.impls("bench", "Allow", "scen", scen, "mode", mode) {
		if strings.HasPrefix(im, "faucet") || !slices.Contains(keyed, im) {
			continue
		}
		if v, ok := r.medianOf("sec/op", "bench", "Allow", "impl", im, "scen", scen, "mode", mode); ok {
			all = append(all, kv{im, v})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	var names []string
	for i := 0; i < n && i < len(all); i++ {
		names = append(names, all[i].name)
	}
	return names
}

// benchstat runs the benchstat tool pinned in go.mod on a results file.
func benchstat(args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"tool", "benchstat"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// benchstat reports bad flags on stderr but exits 0: check both.
	if err := cmd.Run(); err != nil || strings.Contains(errb.String(), "benchstat:") || out.Len() == 0 {
		return "", fmt.Errorf("benchstat %v: %v: %s", args, err, errb.String())
	}
	return out.String(), nil
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// newest loads the newest results file in dir whose name ends in suffix (the
// names start with the date); file is "" if there is none.
func newest(dir, suffix string) (file string, r *results, err error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if len(files) == 0 {
		return "", nil, nil
	}
	sort.Strings(files)
	// Names start with the day; of one day's files, the one whose script
	// recorded the latest time is the newest (a commit hash says nothing of
	// order), and a file without a time is older than one with.
	day := func(f string) string { b := filepath.Base(f); return b[:min(len(b), len("2006-01-02"))] }
	last := files[len(files)-1]
	file, r, err = last, nil, nil
	for i := len(files) - 1; i >= 0 && day(files[i]) == day(last); i-- {
		ri, erri := load(files[i])
		if erri != nil {
			if files[i] == last {
				r, err = ri, erri
			}
			continue
		}
		if r == nil || ri.config["recorded"] > r.config["recorded"] {
			file, r, err = files[i], ri, nil
		}
	}
	return file, r, err
}
