package main

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The headings of the profiles of faucet serve, on net/http and with its
// public listener on fasthttp.
const (
	profileHeading     = "Where serve's time goes"
	fastProfileHeading = "Where serve's time goes on fasthttp"
)

// The ends of the profile files' names: bench/httpprofile.sh's, and its
// ENGINE=fasthttp's, which the first does not match, so that the net/http
// profiles are compared with each other alone.
const (
	profileSuffix     = "-http-profile.txt"
	fastProfileSuffix = "-http-profile-fasthttp.txt"
)

// profileModes are the parts of a profile, in the order shown.
var profileModes = []string{"allow", "deny"}

// profile is one results/*-http-profile.txt (bench/httpprofile.sh).
type profile struct {
	file     string
	recorded string                        // its "# recorded" time; "" in files that lack it
	bench    map[string]map[string]float64 // mode -> unit -> the httpload line's value
	shares   map[string]map[string]float64 // mode -> selected frame -> cumulative share, in percent
	top      map[string]map[string]float64 // mode -> top frame -> the same
}

// share is frame's cumulative share in mode, from the selected frames or
// else the top frames: a file may have selected other frames, or none.
func (p *profile) share(mode, frame string) (float64, bool) {
	if v, ok := p.shares[mode][frame]; ok {
		return v, true
	}
	v, ok := p.top[mode][frame]
	return v, ok
}

// parseProfile reads the httpload line and the selected frames of each
// mode ("## allow ...", "## deny ...") of a profile file.
func parseProfile(file string) (*profile, error) {
	text := readFile(file)
	if text == "" {
		return nil, fmt.Errorf("%s: empty or unreadable", file)
	}
	p := &profile{file: file, bench: map[string]map[string]float64{}, shares: map[string]map[string]float64{}, top: map[string]map[string]float64{}}
	mode, list := "", ""
	for n, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "# recorded "):
			p.recorded = strings.TrimPrefix(line, "# recorded ")
		case strings.HasPrefix(line, "## "):
			mode, _, _ = strings.Cut(strings.TrimPrefix(line, "## "), " ")
			list = ""
			p.shares[mode], p.top[mode] = map[string]float64{}, map[string]float64{}
		case mode == "":
		case strings.HasPrefix(line, "# Benchmark"):
			p.bench[mode] = benchValues(strings.Fields(strings.TrimPrefix(line, "# ")))
		case line == "# top frames" || line == "# selected frames":
			list = line
		case list != "" && line != "":
			// children% self% [.] symbol
			f := strings.Fields(line)
			if len(f) != 4 {
				return nil, fmt.Errorf("%s:%d: want a frame as \"children%% self%% [.] symbol\", have %q", file, n+1, line)
			}
			share, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: share %q: %v", file, n+1, f[0], err)
			}
			if list == "# selected frames" {
				p.shares[mode][f[3]] = share
			} else {
				p.top[mode][f[3]] = share
			}
		}
	}
	if len(p.shares) == 0 {
		return nil, fmt.Errorf("%s: no \"## mode\" sections", file)
	}
	return p, nil
}

// benchValues is the unit -> value pairs of a Go benchmark line's fields.
func benchValues(f []string) map[string]float64 {
	out := map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		if v, err := strconv.ParseFloat(f[i], 64); err == nil {
			out[f[i+1]] = v
		}
	}
	return out
}

// profiles loads the profile files in dir whose names end in suffix,
// oldest first: by the date that starts their names, then by the time
// recorded in them (a file without one is older than any with one on the
// same date), then by name.
func profiles(dir, suffix string) ([]*profile, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	var out []*profile
	for _, f := range files {
		p, err := parseProfile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	day := func(p *profile) string { return filepath.Base(p.file)[:min(10, len(filepath.Base(p.file)))] }
	slices.SortFunc(out, func(a, b *profile) int {
		return cmp.Or(cmp.Compare(day(a), day(b)), cmp.Compare(a.recorded, b.recorded), cmp.Compare(a.file, b.file))
	})
	return out, nil
}

// profileSection compares the selected frames of the oldest profile of
// faucet serve with those of the newest (one column per mode if there is
// one profile), or "" if there is none.
func profileSection(dir string) (string, error) {
	ps, err := profiles(dir, profileSuffix)
	if err != nil || len(ps) == 0 {
		return "", err
	}
	cols := []*profile{ps[0]}
	if len(ps) > 1 {
		cols = append(cols, ps[len(ps)-1])
	}
	var b strings.Builder
	files := []string{cols[0].file}
	if len(cols) > 1 {
		files = append(files, cols[1].file)
	}
	section(&b, 3, profileHeading, files...)
	b.WriteString("Share of faucet serve's CPU samples in each selected frame and what it calls, under\n")
	b.WriteString("16 connections (`./httpprofile.sh`): allow is the rule that never binds, deny the\n")
	b.WriteString("built-in rule; a dash where the profile lists no share for the frame.")
	if len(cols) > 1 {
		b.WriteString(" Before is the\noldest profile, after the newest.")
	}
	b.WriteString(" The first two rows were measured while perf\nsampled, each target loaded alone, so they move with the machine by several percent;\nthe interleaved tables above compare the targets.\n")
	profileTable(&b, cols)
	return b.String(), nil
}

// fastProfileSection shows the selected frames of the newest profile of
// faucet serve on fasthttp, one column per mode, or "" if there is none.
func fastProfileSection(dir string) (string, error) {
	ps, err := profiles(dir, fastProfileSuffix)
	if err != nil || len(ps) == 0 {
		return "", err
	}
	p := ps[len(ps)-1]
	var b strings.Builder
	section(&b, 3, fastProfileHeading, p.file)
	b.WriteString("Share of faucet serve's CPU samples in each selected frame and what it calls, with its\n")
	b.WriteString("public listener on fasthttp (`--http-engine fasthttp`), under 16 connections\n")
	b.WriteString("(`ENGINE=fasthttp ./httpprofile.sh`), in the newest such profile: allow is the rule that\n")
	b.WriteString("never binds, deny the built-in rule; a dash where the profile lists no share for the frame.\n")
	b.WriteString("The first two rows were measured while perf sampled, each target loaded alone.\n")
	profileTable(&b, []*profile{p})
	return b.String(), nil
}

// profileTable writes the selected frames of the profiles cols, mode by
// mode, a column each, below the httpload line's requests/s and CPU.
func profileTable(b *strings.Builder, cols []*profile) {
	b.WriteString("\n| frame |")
	for _, m := range profileModes {
		if len(cols) == 1 {
			fmt.Fprintf(b, " %s |", m)
		} else {
			fmt.Fprintf(b, " %s, before | %s, after |", m, m)
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(profileModes)*len(cols)) + "\n")
	row := func(name string, cell func(p *profile, mode string) string) {
		b.WriteString("| " + name + " |")
		for _, m := range profileModes {
			for _, p := range cols {
				b.WriteString(" " + cell(p, m) + " |")
			}
		}
		b.WriteString("\n")
	}
	bench := func(unit, format string, scale float64) func(p *profile, mode string) string {
		return func(p *profile, mode string) string {
			if v, ok := p.bench[mode][unit]; ok {
				return fmt.Sprintf(format, v*scale)
			}
			return "—"
		}
	}
	row("requests/s while sampled", bench("req/s", "%.0f", 1))
	row("CPU per request", bench("server-cpu-ns/op", "%.1f µs", 1e-3))
	for _, f := range profileFrames(cols) {
		row("`"+strings.TrimPrefix(f, "github.com/faucetgo/faucet/")+"`", func(p *profile, mode string) string {
			if v, ok := p.share(mode, f); ok {
				return fmt.Sprintf("%.2f %%", v)
			}
			return "—"
		})
	}
}

// profileFrames is every selected frame of the profiles, the largest share
// any of them gives it first.
func profileFrames(ps []*profile) []string {
	most := map[string]float64{}
	for _, p := range ps {
		for _, shares := range p.shares {
			for f := range shares {
				most[f] = 0
			}
		}
	}
	for f := range most {
		for _, p := range ps {
			for _, m := range profileModes {
				if v, ok := p.share(m, f); ok {
					most[f] = max(most[f], v)
				}
			}
		}
	}
	var out []string
	for f := range most {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(most[b], most[a]), cmp.Compare(a, b)) })
	return out
}
