package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// scenarios are the BenchmarkAllow scenarios, in document order.
var scenarios = []struct{ name, what string }{
	{"hot", "one key, one goroutine"},
	{"many", "1e6 keys created beforehand, uniformly random order"},
	{"zipf", "the same 1e6 keys, Zipf-distributed order (s = 1.1)"},
	{"par-distinct", "RunParallel, each goroutine on its own 1024 keys"},
	{"par-hot", "RunParallel, every goroutine on one key"},
}

// targets are the ratios BENCHMARKS.md checks: faucet's median over the
// fastest keyed peer's median in the same run.
var targets = []struct {
	scen, mode string
	max        float64
}{
	{"hot", "allow", 0.5}, {"hot", "deny", 0.5},
	{"many", "allow", 0.5}, {"zipf", "allow", 0.5},
	{"par-distinct", "allow", 0.5}, {"par-distinct", "deny", 0.5},
	{"par-hot", "allow", 0.6}, {"par-hot", "deny", 0.5},
}

// maxOverParts is how far scen=hot, mode=allow may stay above the sum of
// its parts.
const maxOverParts = 1.15

const maxBytesPerKey = 64

type ratioRow struct {
	Scen, Mode      string
	Target          string
	Faucet          string
	Peer, PeerValue string
	Ratio           string
	Met             string
}

type doc struct {
	Meta         string
	Commands     string
	Prefix       string
	Ratios       []ratioRow
	MemoryRows   []memRow
	MemoryRatio  string
	AllocsOK     string
	Scenarios    []scenTable
	Scaling      string
	ScalingChart string
	Tail         string
	Sweep        string
	Profiles     []profile
	Misses       []string
	GapNotes     []string
	Cost         string
	Floors       []floorRow
}

type memRow struct{ Impl, BytesPerKey, VsFaucet string }

type scenTable struct{ Name, What, Table string }

type profile struct{ Name, Top, Previous, PreviousTop string }

func render(prefix string) ([]byte, error) {
	allow, err := load(prefix + "-allow.txt")
	if err != nil {
		return nil, err
	}
	var d doc
	d.Prefix = prefix
	d.Meta = strings.TrimSpace(readFile(prefix + "-meta.txt"))
	d.Commands = strings.TrimSpace(readFile(prefix + "-commands.txt"))

	for _, t := range targets {
		row := ratioRow{Scen: t.scen, Mode: t.mode, Target: fmt.Sprintf("≤ %.1f", t.max)}
		f, ok := allow.medianOf("sec/op", "bench", "Allow", "impl", "faucet", "scen", t.scen, "mode", t.mode)
		peers := fastestPeers(allow, t.scen, t.mode, 1)
		if !ok || len(peers) == 0 {
			continue
		}
		p, _ := allow.medianOf("sec/op", "bench", "Allow", "impl", peers[0], "scen", t.scen, "mode", t.mode)
		row.Faucet, row.Peer, row.PeerValue = ns(f), peers[0], ns(p)
		row.Ratio = fmt.Sprintf("%.2f", f/p)
		row.Met = "yes"
		if f/p > t.max {
			row.Met = "**no**"
			d.Misses = append(d.Misses, fmt.Sprintf("scen=%s mode=%s: %.2f against %s (target %s)", t.scen, t.mode, f/p, peers[0], row.Target))
		}
		d.Ratios = append(d.Ratios, row)
	}

	// Allocations of every faucet row.
	allocs := "0 in every faucet row"
	for _, s := range allow.find("bench", "Allow") {
		if strings.HasPrefix(s.config["impl"], "faucet") && median(s.values["allocs/op"]) != 0 {
			allocs = fmt.Sprintf("**%v in %s/%s/%s**", median(s.values["allocs/op"]), s.config["impl"], s.config["scen"], s.config["mode"])
			d.Misses = append(d.Misses, "allocations: "+allocs)
		}
	}
	d.AllocsOK = allocs

	for _, sc := range scenarios {
		table, err := benchstat("-filter", "/scen:"+sc.name, "-row", "/impl", "-col", "/mode", prefix+"-allow.txt")
		if err != nil {
			return nil, err
		}
		d.Scenarios = append(d.Scenarios, scenTable{sc.name, sc.what, strings.TrimSpace(table)})
	}

	if mem, err := load(prefix + "-memory.txt"); err == nil {
		fb, _ := mem.medianOf("B/key", "bench", "Memory", "impl", "faucet")
		best := ""
		bestV := 0.0
		for _, im := range mem.impls("bench", "Memory") {
			v, _ := mem.medianOf("B/key", "bench", "Memory", "impl", im)
			d.MemoryRows = append(d.MemoryRows, memRow{im, fmt.Sprintf("%.1f", v), fmt.Sprintf("%.2f", fb/v)})
			if !strings.HasPrefix(im, "faucet") && (best == "" || v < bestV) {
				best, bestV = im, v
			}
		}
		d.MemoryRatio = fmt.Sprintf("faucet %.1f B/key (target ≤ %d B); best peer %s %.1f B/key", fb, maxBytesPerKey, best, bestV)
		if fb > maxBytesPerKey {
			d.Misses = append(d.Misses, fmt.Sprintf("memory: %.1f B/key > %d", fb, maxBytesPerKey))
		}
	}

	if _, err := os.Stat(prefix + "-scaling.txt"); err == nil {
		if d.Scaling, err = benchstat("-row", "/keys", "-col", "/impl", "-filter", ".unit:(sec/op OR B/key)", prefix+"-scaling.txt"); err != nil {
			return nil, err
		}
		sc, err := load(prefix + "-scaling.txt")
		if err != nil {
			return nil, err
		}
		chart := prefix + "-scaling.svg"
		if err := drawScaling(sc, chart); err != nil {
			return nil, err
		}
		d.ScalingChart = "bench/" + filepath.ToSlash(chart)
	}
	if _, err := os.Stat(prefix + "-tail.txt"); err == nil {
		if d.Tail, err = benchstat("-row", "/impl", prefix+"-tail.txt"); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(prefix + "-sweep.txt"); err == nil {
		if d.Sweep, err = benchstat(prefix + "-sweep.txt"); err != nil {
			return nil, err
		}
	}
	if cost, err := load(prefix + "-cost.txt"); err == nil {
		if d.Cost, err = benchstat("-row", "/part", prefix+"-cost.txt"); err != nil {
			return nil, err
		}
		missed := map[string]bool{}
		for _, r := range d.Ratios {
			if r.Met != "yes" {
				missed[r.Scen] = true
			}
		}
		d.GapNotes = gapNotes(cost, allow, missed)
		d.Floors = floors(cost, allow)
		for _, f := range d.Floors {
			if f.Met == "**no**" {
				d.Misses = append(d.Misses, fmt.Sprintf("scen=hot mode=allow: %s its floor (target ≤ %.2f)", f.Ratio, maxOverParts))
			}
		}
	}
	for _, p := range []string{"hot", "many", "par-distinct", "par-hot"} {
		if top := readFile(prefix + "-profile-" + p + ".txt"); top != "" {
			pr := profile{Name: p, Top: strings.TrimSpace(top)}
			if p == "many" {
				// The memory-bound scenario's profile is the one that
				// changes with the table's layout: show the run before too.
				if prev := previousRun(prefix, "-profile-many.txt"); prev != "" {
					pr.Previous = filepath.Base(prev)
					pr.PreviousTop = strings.TrimSpace(readFile(prev + "-profile-many.txt"))
				}
			}
			d.Profiles = append(d.Profiles, pr)
		}
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, d); err != nil {
		return nil, err
	}
	ab, err := abSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(ab)
	http, err := httpSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(http)
	redis, err := redisSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(redis)
	leased, err := leasedSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(leased)
	rls, err := rlsSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(rls)
	pg, err := postgresSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(pg)
	pgLeased, err := leasedPostgresSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(pgLeased)
	audit, err := auditSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(audit)
	shared, err := sharedloadSection(filepath.Dir(prefix))
	if err != nil {
		return nil, err
	}
	buf.WriteString(shared)
	return buf.Bytes(), nil
}

func ns(sec float64) string { return fmt.Sprintf("%.1f ns", sec*1e9) }

var page = template.Must(template.New("page").Parse(pageText))

// gapNotes explains each missed time target from measured parts of a call
// (BenchmarkCost) and the rows of the same run: what the target leaves per
// call, what the parts that no exact, keyed, lock-free limiter with counters
// can drop already cost, and what would close the rest. It says nothing about
// targets that were met.
func gapNotes(cost, allow *results, missed map[string]bool) []string {
	part := func(p string) float64 {
		v, _ := cost.medianOf("sec/op", "bench", "Cost", "part", p)
		return v * 1e9
	}
	row := func(im, scen, mode string) float64 {
		v, _ := allow.medianOf("sec/op", "bench", "Allow", "impl", im, "scen", scen, "mode", mode)
		return v * 1e9
	}
	peerOf := func(scen, mode string) (string, float64) {
		p := fastestPeers(allow, scen, mode, 1)
		if len(p) == 0 {
			return "", 0
		}
		return p[0], row(p[0], scen, mode)
	}
	clock, hash, lookup, step, cas, add := part("clock"), part("hash"), part("lookup"), part("step"), part("cas"), part("add")
	floor := clock + hash + lookup + cas + add
	var notes []string
	if missed["hot"] {
		peer, p := peerOf("hot", "allow")
		f := row("faucet", "hot", "allow")
		notes = append(notes, fmt.Sprintf(`**scen=hot.** The target leaves %.1f ns per call (half of %s's %.1f ns).
The parts of a faucet call that no design with faucet's guarantees can drop
already cost %.1f ns, each timed alone in BenchmarkCost: the monotonic clock
read (%.1f ns; exact refill needs the time of every call), the key's hash and
index lookup (%.1f ns), one CompareAndSwap to publish the new state (%.1f ns),
and one atomic add for Stats (%.1f ns). The fixed-point step adds %.1f ns, and
calls and loads between the parts the remaining %.1f ns of faucet's %.1f ns.
The peers read the wall clock and the monotonic clock on every call
(time.Now(), %.1f ns here; go-limiter reaches the runtime's time.now directly,
at the same cost), where faucet reads only the monotonic clock: that read is
most of faucet's lead over them. %s A clock published by a background
goroutine would be cheaper to read, but it lags by a varying amount, so the
span between two of its readings can exceed the real one and admit early,
which faucet promises never to do.`,
			p/2, peer, p, floor, clock, hash+lookup, cas, add, step, max(0, f-floor-step), f,
			part("now"), clockBudget(p/2, floor, clock)))
	}
	if missed["par-distinct"] {
		peer, p := peerOf("par-distinct", "allow")
		procs := 2
		for _, s := range allow.find("bench", "Allow", "impl", "faucet", "scen", "par-distinct") {
			if s.procs > 0 {
				procs = s.procs
			}
		}
		core := p / 2 * float64(procs)
		f := row("faucet", "par-distinct", "allow")
		verdict := fmt.Sprintf(`The budget is more than those parts need, so
this target is not ruled out by them: faucet spends %.1f ns of core time per
call here against %.1f ns on one goroutine (scen=hot), and the difference is
what %d goroutines on %d cores lose to each other and to whatever else the
machine runs.`, f*float64(procs), row("faucet", "hot", "allow"), procs, procs)
		if core < floor {
			verdict = "The target is out of reach on this machine for the same reason as scen=hot."
		}
		notes = append(notes, fmt.Sprintf(`**scen=par-distinct.** Every goroutine takes from 1024 keys of its own, all
in cache, so this is scen=hot spread over %d cores: the target leaves
%.1f ns per call (half of %s's %.1f ns), that is %.1f ns of one core's time,
while the parts of a call that no design can drop (clock, hash and lookup,
CompareAndSwap, counter add; see scen=hot) take %.1f ns. %s`,
			procs, p/2, peer, p, core, floor, verdict))
	}
	if missed["par-hot"] {
		peer, p := peerOf("par-hot", "allow")
		fh, fp := row("faucet", "hot", "allow"), row("faucet", "par-hot", "allow")
		ph := row(peer, "hot", "allow")
		notes = append(notes, fmt.Sprintf(`**scen=par-hot.** Every admitted call must change the one key's state, so
the cache line holding it moves to the core of each caller in turn; the
target leaves %.1f ns per call (%.1f of %s's %.1f ns). A CompareAndSwap loop
alone on one word from every core runs at %.1f ns per operation here
(part=cas-shared), because a core in a tight loop keeps the line for several
operations in a row; between two faucet calls the other core takes the line
away, so each admitted call waits for a transfer, and faucet spends %.1f ns
per call here against %.1f ns on one key alone. A mutex-based peer puts the
waiting goroutine to spin or sleep, so its calls run one at a time at close
to its one-key speed (%s: %.1f ns on one key, %.1f ns here). Run one at a
time, faucet would take its one-key %.1f ns, %.2f of %s; below that, calls
must overlap, and each overlap costs a transfer whose price depends on where
the machine places the two cores. Going lower still would need each core to
spend tokens from a local share, which either lets a call be denied while
another core's share still holds tokens or needs the cores to agree again:
faucet keeps one exact word per key instead.`,
			targetOf("par-hot", "allow")*p, targetOf("par-hot", "allow"), peer, p, part("cas-shared"), fp, fh, peer, ph, p, fh, fh/p, peer))
	}
	for _, scen := range []string{"many", "zipf"} {
		if !missed[scen] {
			continue
		}
		peer, p := peerOf(scen, "allow")
		f, fh := row("faucet", scen, "allow"), row("faucet", "hot", "allow")
		notes = append(notes, fmt.Sprintf(`**scen=%s.** With 1e6 keys faucet spends %.1f ns per call against %.1f ns
on one hot key. A lookup reads one line that is not in cache, the index slot
holding the key in place and its word (and the next line when the first is
full of other keys); the call starts loading it before it reads the clock,
so the two wait together. The floor above counts one line of a table of 32
bytes per key (%.1f ns, part=line-%s); faucet's index takes about 48 bytes
per key, a larger table whose lines miss the TLB more often, and the
harness's own read of each call's key string comes on top for every
implementation. The target leaves %.1f ns (%.1f of %s's %.1f ns).`,
			scen, f, fh, part("line-"+scen), scen, targetOf(scen, "allow")*p, targetOf(scen, "allow"), peer, p))
	}
	return notes
}

// targetOf returns the ratio targets holds for scen and mode.
func targetOf(scen, mode string) float64 {
	for _, t := range targets {
		if t.scen == scen && t.mode == mode {
			return t.max
		}
	}
	return 0
}

// clockBudget says what the one-key target would ask of a clock read, given
// the time per call it leaves and the cost of the other parts that stay.
func clockBudget(budget, floor, clock float64) string {
	rest := floor - clock
	if left := budget - rest; left > 0 {
		return fmt.Sprintf(`Meeting the target would take a clock read of at most %.1f ns that
never runs ahead of real time, against %.1f ns for the monotonic clock here.`, left, clock)
	}
	return fmt.Sprintf(`Even a free clock read would not meet it: the other parts that stay take
%.1f ns.`, rest)
}
