package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// adaptiveHeading is the heading of bench/adaptive.sh's runs.
const adaptiveHeading = "An adaptive rate through faucet serve"

// adaptiveSection renders the newest results/*-adaptive.txt
// (bench/adaptive.sh), or "" if there is none: for each run (a bound on
// the upstream's queue) and each change of the upstream's capacity, how
// long its p99 took to come back under the target and what faucet
// admitted in the 10 s after, against the targets; then the seconds
// around each change, every run side by side.
func adaptiveSection(dir string) (string, error) {
	file, r, err := newest(dir, "-adaptive.txt")
	if file == "" || err != nil {
		return "", err
	}
	figs := r.find("bench", "Adaptive")
	if len(figs) == 0 {
		return "", nil
	}
	queues := r.distinct("queue", "bench", "AdaptiveSecond")
	// at is a run's value of unit in second t, and whether it has one.
	at := func(queue string, t int, unit string) (float64, bool) {
		return r.medianOf(unit, "bench", "AdaptiveSecond", "queue", queue, "t", fmt.Sprintf("%02d", t))
	}

	var b strings.Builder
	section(&b, 2, adaptiveHeading, file)
	if rule := r.config["rule"]; rule != "" {
		fmt.Fprintf(&b, "Rule: `%s`. ", rule)
	}
	b.WriteString("Targets, at a drop of the capacity: the upstream's p99 back under the latency target within 10 s, " +
		"and the admitted rate over the 10 s after that within 20 % of the new capacity.\n\n")
	b.WriteString("| upstream queue | capacity | p99 under the target for 3 s from | admitted over the 10 s after | ÷ new capacity | served over the 10 s after | rate at 90 % of the capacity |\n|---|---|---|---|---|---|---|\n")
	for _, f := range figs {
		v := func(unit string) (float64, bool) {
			if xs := f.values[unit]; len(xs) > 0 {
				return xs[0], true
			}
			return 0, false
		}
		q, change := f.config["queue"], strings.TrimSuffix(f.config["at"], "s")
		d, _ := strconv.Atoi(change)
		newCap, _ := v("capacity/s")
		oldCap, _ := at(q, d-1, "capacity/s")
		settle := "never, within the run"
		if s, ok := v("settle-s"); ok && s >= 0 {
			settle = fmt.Sprintf("%.0f s after", s)
		}
		admitted, share, served := "–", "–", "–"
		if a, ok := v("admitted/s"); ok {
			p, _ := v("pct-of-capacity")
			sv, _ := v("served/s")
			admitted, share, served = fmt.Sprintf("%.1f/s", a), fmt.Sprintf("%.1f %%", p), fmt.Sprintf("%.1f/s", sv)
		}
		reach := "–"
		if s, ok := v("reach90-s"); ok {
			reach = "not within the run"
			if s >= 0 {
				reach = fmt.Sprintf("%.0f s after", s)
			}
		}
		fmt.Fprintf(&b, "| %s | %.0f → %.0f/s at %d s | %s | %s | %s | %s | %s |\n", q, oldCap, newCap, d, settle, admitted, share, served, reach)
	}

	// The seconds from 2 before each change to 15 after.
	var ts []int
	for _, f := range figs {
		d, _ := strconv.Atoi(strings.TrimSuffix(f.config["at"], "s"))
		for t := d - 2; t <= d+15; t++ {
			if _, ok := at(f.config["queue"], t, "capacity/s"); ok && !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
	}
	slices.Sort(ts)
	b.WriteString("\nEach second around the changes: the rate scraped mid-second, the requests sent in the second that were admitted, the upstream's p99 (ms) of what left its queue in the second.\n\n| s | capacity |")
	for _, q := range queues {
		fmt.Fprintf(&b, " queue %s: rate | admitted | p99 |", q)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|---|---|", len(queues)) + "\n")
	for i, t := range ts {
		if i > 0 && t > ts[i-1]+1 {
			b.WriteString("| … |" + strings.Repeat(" |", 1+3*len(queues)) + "\n")
		}
		c, _ := at(queues[0], t, "capacity/s")
		fmt.Fprintf(&b, "| %d | %.0f |", t, c)
		for _, q := range queues {
			rate, _ := at(q, t, "rate/s")
			adm, _ := at(q, t, "admitted/s")
			p99, _ := at(q, t, "upstream-p99-ms")
			fmt.Fprintf(&b, " %.0f | %.0f | %.1f |", rate, adm, p99)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
