package main

import (
	"fmt"
	"strings"
)

// floorRow is one scenario's physical floor: the least time per call that
// the parts no exact limiter can skip take on this machine, from
// BenchmarkCost, and faucet's time over it.
type floorRow struct {
	Scen, Mode string
	Floor      string
	Parts      string
	Faucet     string
	Ratio      string
}

// floors builds the floor of every scenario and mode that the allow results
// hold. A call on one hot key needs the clock, the hash and the lookup, the
// step and the counter add, and, when it admits, one CompareAndSwap (a
// denial writes nothing). scen=many and scen=zipf add one memory latency in
// their call order (part=line-many, part=line-zipf), less the clock read,
// which a call overlaps with the line's load; par-distinct spreads
// one-key calls over the cores; par-hot does too, except that admitting
// calls take turns on the shared word (part=cas-shared per call).
func floors(cost, allow *results) []floorRow {
	part := func(p string) float64 {
		v, _ := cost.medianOf("sec/op", "bench", "Cost", "part", p)
		return v * 1e9
	}
	procs := procsOf(allow)
	read := part("clock") + part("hash") + part("lookup") + part("step") + part("add")
	const readParts = "clock + hash + lookup + step + add"
	var rows []floorRow
	for _, sc := range scenarios {
		for _, mode := range []string{"allow", "deny"} {
			f, ok := allow.medianOf("sec/op", "bench", "Allow", "impl", "faucet", "scen", sc.name, "mode", mode)
			if !ok {
				continue
			}
			one, oneParts := read, readParts
			if mode == "allow" {
				one, oneParts = read+part("cas"), readParts+" + cas"
			}
			var floor float64
			var parts string
			switch sc.name {
			case "hot":
				floor, parts = one, oneParts
			case "many", "zipf":
				line := part("line-" + sc.name)
				if line == 0 { // results from before the part existed
					continue
				}
				// The line is in flight while the clock is read (a
				// prefetch), so only the longer of the two counts.
				clock := part("clock")
				floor = one - clock + max(clock, line)
				parts = strings.Replace(oneParts, "clock + ", "", 1) + " + max(clock, line-" + sc.name + ")"
			case "par-distinct":
				floor, parts = one/float64(procs), fmt.Sprintf("(%s) / %d cores", oneParts, procs)
			case "par-hot":
				floor, parts = one/float64(procs), fmt.Sprintf("(%s) / %d cores", oneParts, procs)
				if mode == "allow" {
					floor = read/float64(procs) + part("cas-shared")
					parts = fmt.Sprintf("(%s) / %d cores + cas-shared", readParts, procs)
				}
			}
			if floor <= 0 {
				continue
			}
			rows = append(rows, floorRow{Scen: sc.name, Mode: mode, Floor: fmt.Sprintf("%.1f ns", floor), Parts: parts,
				Faucet: ns(f), Ratio: fmt.Sprintf("%.2f×", f*1e9/floor)})
		}
	}
	return rows
}
