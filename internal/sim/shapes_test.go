package sim

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine has
)

// A calendar quota of 100 a day, fed 10 requests an hour from midnight:
// each day's first 10 hours take the quota, and the rest of the day is
// denied until the next period begins at midnight.
func TestSimQuota(t *testing.T) {
	code, out, errs := runArgs("--quota", "100", "--period", "day", "--load", "10/h", "--duration", "72h", "--interval", "6h")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	head := "load 10/h (cost 1), 72h in steps of 6h, from 2026-01-01T00:00:00Z\ncalendar quota: 100 a day 00:00 (UTC)\n\n"
	if !strings.HasPrefix(out, head) {
		t.Errorf("report starts %q, want %q", out[:min(len(out), len(head))], head)
	}
	day := [][]string{{"60", "60", "0", "40.000"}, {"60", "40", "20", "0.000"}, {"60", "0", "60", "0.000"}, {"60", "0", "60", "0.000"}}
	var want [][]string
	for range 3 {
		for _, r := range day {
			want = append(want, r)
		}
	}
	checkColumns(t, out, want)
	if !strings.Contains(out, "\ncalendar quota: 100 a day 00:00 (UTC): admitted 300, denied 420, most in any 24h: 100\n") {
		t.Errorf("summary line missing or wrong:\n%s", out)
	}
}

// checkColumns is checkRows without the first two columns (the times).
func checkColumns(t *testing.T, out string, want [][]string) {
	t.Helper()
	rows := simRows(out)
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%s", len(rows), len(want), out)
	}
	for i, w := range want {
		if got := rows[i][2:]; !slices.Equal(got, w) {
			t.Errorf("row %d = %v, want %v", i, got, w)
		}
	}
}

// A quota's periods follow the calendar of its zone from --start: the
// clock starts mid-period, and a period begins at the anchor of the zone.
func TestSimQuotaCalendar(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		sum  string // the summary line after the title
	}{{
		// Starting at 18:00 UTC, the first period ends 6 h in (60
		// requests, all admitted); the next two are whole days (100 of
		// 240 each), and the last 18 h admit 100 of 180.
		name: "start",
		args: []string{"--quota", "100", "--load", "10/h", "--duration", "72h", "--start", "2026-01-01T18:00:00Z"},
		sum:  "calendar quota: 100 a day 00:00 (UTC): admitted 360, denied 360,",
	}, {
		// Midnight in Tokyo (UTC+9) is 15:00 UTC: the first period
		// admits 100 of 150 requests, the second 100 of 240.
		name: "zone",
		args: []string{"--quota", "100", "--time-zone", "Asia/Tokyo", "--load", "10/h", "--duration", "39h"},
		sum:  "calendar quota: 100 a day 00:00 (Asia/Tokyo): admitted 200, denied 190,",
	}, {
		// A month from the 15th at 09:00: the period that began on
		// December 15th ends a day and 9 hours in.
		name: "month",
		args: []string{"--quota", "10", "--period", "month", "--anchor-day", "15", "--anchor-hour", "9",
			"--start", "2026-01-14T00:00:00Z", "--load", "1/h", "--duration", "48h"},
		sum: "calendar quota: 10 a month from day 15 09:00 (UTC): admitted 20, denied 28,",
	}, {
		name: "week",
		args: []string{"--quota", "5", "--period", "week", "--anchor-weekday", "friday",
			"--load", "1/h", "--duration", "48h"},
		// January 1st, 2026 is a Thursday: a period begins a day in.
		sum: "calendar quota: 5 a week from friday (UTC): admitted 10, denied 38,",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runArgs(append(tt.args, "--interval", "24h")...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if !strings.Contains(out, "\n"+tt.sum) {
				t.Errorf("want the summary %q:\n%s", tt.sum, out)
			}
		})
	}
}

// A strict window of 100 in any 24 h, in 16 slots of 1.5 h, fed 10
// requests an hour: the first 10 hours take the limit; the next request
// is admitted once the slot of the first ones leaves the window, when the
// 17 slots a take reads (25.5 h) no longer reach them: at 25.5 h. No 24 h
// ever hold more than 100.
func TestSimWindow(t *testing.T) {
	code, out, errs := runArgs("--window-limit", "100", "--window", "24h", "--load", "10/h", "--duration", "72h", "--interval", "6h")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	checkColumns(t, out, [][]string{
		{"60", "60", "0", "40.000"}, {"60", "40", "20", "0.000"}, {"60", "0", "60", "0.000"}, {"60", "0", "60", "0.000"},
		{"60", "45", "15", "0.000"}, {"60", "55", "5", "0.000"}, {"60", "0", "60", "0.000"}, {"60", "0", "60", "0.000"},
		{"60", "30", "30", "0.000"}, {"60", "60", "0", "0.000"}, {"60", "10", "50", "0.000"}, {"60", "0", "60", "0.000"},
	})
	if !strings.Contains(out, "\nstrict window: 100 in any 24h (16 slots): admitted 300, denied 420, most in any 24h: 100\n") {
		t.Errorf("summary line missing or wrong:\n%s", out)
	}
	// One slot: the window is counted in two of 24 h, and admits again
	// only 48 h after it filled.
	code, out, _ = runArgs("--window-limit", "100", "--window", "24h", "--slots", "1", "--load", "10/h", "--duration", "72h", "--interval", "24h")
	if code != 0 || !strings.Contains(out, "strict window: 100 in any 24h (1 slots): admitted 200, denied 520, most in any 24h: 100\n") {
		t.Errorf("exit %d, one slot:\n%s", code, out)
	}
}

// Side by side, each shape gets the same load on a limiter of its own.
// This is docs/engine.md's example: the clock starts at 14:00, 10 h before
// the quota's next period, so the quota admits 100 before midnight and
// 100 after, 200 within 24 h; the token bucket of 100 a day and burst 100
// admits 199 in the first 24 h (its burst and a day's refill); the window
// never more than 100.
func TestSimSideBySide(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.svg")
	code, out, errs := runArgs("--rate", "100/24h", "--burst", "100", "--quota", "100", "--period", "day", "--window-limit", "100", "--window", "24h",
		"--load", "10/h", "--duration", "72h", "--interval", "6h", "--start", "2026-01-01T14:00:00Z", "--svg", path)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"load 10/h (cost 1), 72h in steps of 6h, from 2026-01-01T14:00:00Z\ntoken bucket: rate 100/24h, burst 100\n" +
			"calendar quota: 100 a day 00:00 (UTC)\nstrict window: 100 in any 24h (16 slots)\n\n",
		"\ntoken bucket: rate 100/24h, burst 100: admitted 399, denied 321, most in any 24h: 199\n" +
			"calendar quota: 100 a day 00:00 (UTC): admitted 400, denied 320, most in any 24h: 200\n" +
			"strict window: 100 in any 24h (16 slots): admitted 300, denied 420, most in any 24h: 100\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The table: sent, then admitted and denied of each shape.
	rows := regexp.MustCompile(`(?m)^\s*(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`).FindAllStringSubmatch(out, -1)
	if len(rows) != 12 || strings.Join(rows[4][1:], " ") != "24h 30h 60 25 35 0 60 45 15" {
		t.Errorf("want 12 rows, the fifth 24h 30h 60 25 35 0 60 45 15:\n%s", out)
	}
	if !regexp.MustCompile(`total\s+720\s+399\s+321\s+400\s+320\s+300\s+420`).MatchString(out) {
		t.Errorf("totals line missing or wrong:\n%s", out)
	}
	svg := readSVG(t, path)
	var titles []string
	for _, s := range svg.texts {
		if strings.HasPrefix(s, "token bucket:") || strings.HasPrefix(s, "calendar quota:") || strings.HasPrefix(s, "strict window:") {
			titles = append(titles, s)
		}
	}
	want := []string{"token bucket: rate 100/24h, burst 100", "calendar quota: 100 a day 00:00 (UTC)", "strict window: 100 in any 24h (16 slots)"}
	if !slices.Equal(titles, want) {
		t.Errorf("chart's panels are titled %q, want %q", titles, want)
	}
	// The quota's three new periods, at 10 h, 34 h and 58 h, marked.
	if svg.dashed != 3+1 {
		t.Errorf("chart has %d dashed paths, want 4: 3 new periods and the legend's", svg.dashed)
	}
}

// Only the shapes asked for run: the token bucket joins another shape
// when one of its flags is given.
func TestSimWhichShapes(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		titles []string
	}{
		{nil, []string{"token bucket"}},
		{[]string{"--quota", "5"}, []string{"calendar quota"}},
		{[]string{"--window-limit", "5", "--window", "1s"}, []string{"strict window"}},
		{[]string{"--quota", "5", "--burst", "50"}, []string{"token bucket", "calendar quota"}},
		{[]string{"--window-limit", "5", "--window", "1s", "--set-limit", "1s=5/s"}, []string{"token bucket", "strict window"}},
		{[]string{"--rate", "10", "--window-limit", "5", "--window", "1s", "--quota", "5"}, []string{"token bucket", "calendar quota", "strict window"}},
	} {
		code, out, errs := runArgs(append([]string{"--duration", "2s"}, tt.args...)...)
		if code != 0 {
			t.Errorf("faucet sim %q: exit %d, stderr %q", tt.args, code, errs)
			continue
		}
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^(token bucket|calendar quota|strict window):.*admitted`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, tt.titles) {
			t.Errorf("faucet sim %q: summaries of %q, want %q", tt.args, got, tt.titles)
		}
	}
}

// Every bad flag of a quota or a window is refused before anything runs,
// exit status 2, each problem on a line naming its flag and its range.
func TestSimShapeErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msgs []string
	}{
		{[]string{"--quota", "0"}, []string{"faucet sim: --quota: engine: invalid config: Quota must be between 0.001 and 1e9 tokens, a multiple of 0.001, got 0"}},
		{[]string{"--quota", "1.0001"}, []string{"--quota: engine: invalid config: Quota must be between 0.001 and 1e9 tokens, a multiple of 0.001, got 1.0001"}},
		{[]string{"--quota", "lots"}, []string{`faucet sim: --quota: want a number of tokens such as 1000, got "lots"`}},
		{[]string{"--quota", "5", "--period", "fortnight"}, []string{`faucet sim: --period: want day, week, month or year, got "fortnight"`}},
		{[]string{"--quota", "5", "--time-zone", "Mars/Olympus"}, []string{`faucet sim: --time-zone: want a zone of the IANA database such as Europe/Berlin, or UTC, got "Mars/Olympus"`}},
		{[]string{"--quota", "5", "--time-zone", "Local"}, []string{`--time-zone: want a zone of the IANA database`}},
		{[]string{"--quota", "5", "--anchor-hour", "24"}, []string{"faucet sim: --anchor-hour: engine: invalid config: Hour must be between 0 and 23, got 24"}},
		{[]string{"--quota", "5", "--anchor-day", "3"}, []string{"faucet sim: --anchor-day: engine: invalid config: Day must be 0: only a monthly or yearly period has a first day of the month, got 3"}},
		{[]string{"--quota", "5", "--period", "month", "--anchor-day", "32"}, []string{"--anchor-day: engine: invalid config: Day must be between 1 and 31 (0 is the 1st), got 32"}},
		{[]string{"--quota", "5", "--period", "week", "--anchor-weekday", "caturday"}, []string{`faucet sim: --anchor-weekday: want monday to sunday, got "caturday"`}},
		{[]string{"--quota", "5", "--anchor-weekday", "friday"}, []string{"faucet sim: --anchor-weekday: engine: invalid config: Weekday must be 0: only a weekly period has a first weekday, got 5"}},
		{[]string{"--quota", "5", "--period", "year", "--anchor-month", "13"}, []string{"faucet sim: --anchor-month: engine: invalid config: Month must be between 1 and 12 (0 is January), got 13"}},
		{[]string{"--window-limit", "0", "--window", "1h"}, []string{"faucet sim: --window-limit: engine: invalid config: Limit must be between 0.001 and 4e6 tokens, a multiple of 0.001, got 0"}},
		{[]string{"--window-limit", "many", "--window", "1h"}, []string{`faucet sim: --window-limit: want a number of tokens such as 100, got "many"`}},
		{[]string{"--window-limit", "10"}, []string{"faucet sim: --window: engine: invalid config: Window must be between 1s and 366 days (8784h), got 0s"}},
		{[]string{"--window-limit", "10", "--window", "1h", "--slots", "65"}, []string{"faucet sim: --slots: engine: invalid config: Slots must be between 1 and 64 (0 is 16), got 65"}},
		{[]string{"--window-limit", "5e6", "--window", "500ms"}, []string{
			"faucet sim: --window-limit: engine: invalid config: Limit must be between 0.001 and 4e6 tokens",
			"faucet sim: --window: engine: invalid config: Window must be between 1s and 366 days (8784h), got 500ms"}},
		{[]string{"--window", "1h", "--slots", "4"}, []string{
			"faucet sim: --window sets a strict window: give --window-limit too",
			"faucet sim: --slots sets a strict window: give --window-limit too"}},
		{[]string{"--period", "week"}, []string{"faucet sim: --period sets a calendar quota: give --quota too"}},
		{[]string{"--start", "yesterday"}, []string{`faucet sim: --start: want an instant in RFC 3339 such as 2026-01-01T00:00:00Z, got "yesterday"`}},
		{[]string{"--start", "1600-01-01T00:00:00Z"}, []string{"faucet sim: --start and --duration: the run must lie between 1900-01-01 and 2262-01-01, got 1600-01-01T00:00:00Z to 1600-01-01T00:00:02Z"}},
		{[]string{"--start", "2261-12-31T23:59:59Z", "--quota", "5"}, []string{"faucet sim: --start and --duration: the run must lie between 1900-01-01 and 2262-01-01, got 2261-12-31T23:59:59Z to 2262-01-01T00:00:01Z"}},
		{[]string{"--rate", "0", "--quota", "5"}, []string{"faucet sim: --rate: engine: invalid config: Limit must be between"}},
		{[]string{"--burst", "0.5"}, []string{"faucet sim: --burst: engine: invalid config: Burst must be between 1 and 1e9"}},
		{[]string{"--rate", "1/8784h", "--burst", "50"}, []string{"faucet sim: --burst/--rate: engine: invalid config: Burst/Limit must be at most 366 days"}},
		{[]string{"--burst", "0.5", "--quota", "0"}, []string{
			"faucet sim: --burst: engine: invalid config: Burst must be between 1 and 1e9",
			"faucet sim: --quota: engine: invalid config: Quota must be between"}},
	} {
		code, out, errs := runArgs(append([]string{"--duration", "2s"}, tt.args...)...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		ok := code == 2 && out == "" && len(lines) == len(tt.msgs)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.Contains(lines[i], tt.msgs[i])
		}
		if !ok {
			t.Errorf("faucet sim %q: exit %d, stdout %.40q, stderr %q; want exit 2, no output, the lines %q", tt.args, code, out, errs, tt.msgs)
		}
	}
	// A malformed --anchor-month is the flag package's error, and the usage.
	if code, _, errs := runArgs("--quota", "5", "--period", "year", "--anchor-month", "may"); code != 2 || !strings.Contains(errs, `invalid value "may" for flag -anchor-month`) {
		t.Errorf("--anchor-month may: exit %d, stderr %.80q", code, errs)
	}
}

// Costs above a quota or a window are legal, and warned of.
func TestSimShapeWarnings(t *testing.T) {
	code, _, errs := runArgs("--duration", "2s", "--cost", "6", "--quota", "5", "--window-limit", "5", "--window", "1s")
	for _, want := range []string{
		"faucet sim: warning: --cost 6 is above --quota 5: no period holds that many tokens, so every request will be denied\n",
		"faucet sim: warning: --cost 6 is above --window-limit 5: no window holds that many tokens, so every request will be denied\n",
	} {
		if code != 0 || !strings.Contains(errs, want) {
			t.Errorf("exit %d, stderr %q; want %q", code, errs, want)
		}
	}
	if strings.Contains(errs, "--burst") {
		t.Errorf("stderr %q warns of the token bucket, which does not run", errs)
	}
}

func TestMostInSpan(t *testing.T) {
	// Requests at 0, 1, ..., 9 s; admitted: 0, 1, 2, 5, 6, 7, 8.
	bits := []uint64{0b1_1110_0111}
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	for _, tt := range []struct {
		span time.Duration
		want int
	}{{time.Second, 1}, {3 * time.Second, 3}, {4 * time.Second, 4}, {5 * time.Second, 4}, {6 * time.Second, 4}, {7 * time.Second, 5}, {time.Hour, 7}} {
		if got := mostInSpan(bits, 10, at, tt.span); got != tt.want {
			t.Errorf("mostInSpan(span %v) = %d, want %d", tt.span, got, tt.want)
		}
	}
}

// A pause sends nothing, and the token bucket refills meanwhile: drained
// at 0.9 s, it holds 21 tokens at 3 s, and admits those and the next
// second's refill, 9 tokens by the last request at 3 59/60 s.
func TestSimPause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.svg")
	code, out, errs := runArgs("--rate", "10", "--burst", "50", "--load", "60/s", "--duration", "5s", "--pause", "1s-3s", "--svg", path)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if head := "rate 10/s, burst 50, load 60/s (cost 1), 5s in steps of 1s\nfrom 1s to 3s: no requests\n\n"; !strings.HasPrefix(out, head) {
		t.Errorf("report starts %q, want %q", out[:min(len(out), len(head))], head)
	}
	checkRows(t, out, [][]string{
		{"0s", "1s", "60", "59", "1"},
		{"1s", "2s", "0", "0", "0", "11.000"},
		{"2s", "3s", "0", "0", "0", "21.000"},
		{"3s", "4s", "60", "30", "30"},
		{"4s", "5s", "60", "10", "50"},
	})
	svg := readSVG(t, path)
	if !slices.Contains(svg.texts, "rate 10/s, burst 50, load 60/s, none from 1s to 3s") || svg.paused != 2 {
		t.Errorf("chart has %d shaded pauses and texts %q; want the pause in the title and shaded in both panels", svg.paused, svg.texts)
	}
	// In a stack, shaded in each panel; pauses in time order.
	code, _, errs = runArgs("--quota", "30", "--window-limit", "20", "--window", "2s", "--load", "60/s", "--duration", "5s",
		"--pause", "4s-5s", "--pause", "1s-2s", "--svg", path)
	svg = readSVG(t, path)
	if code != 0 || !slices.Contains(svg.texts, "load 60/s, none from 1s to 2s, from 4s to 5s") || svg.paused != 4 {
		t.Errorf("exit %d, stderr %q; chart has %d shaded pauses and texts %q; want two pauses in the title and in each of two panels",
			code, errs, svg.paused, svg.texts)
	}
}

func TestSimPauseErrors(t *testing.T) {
	for _, tt := range []struct {
		arg, msg string
	}{
		{"2s", `faucet sim: --pause: want FROM-TO, two times into the simulation such as 10s-20s; got "2s"`},
		{"2-3s", `faucet sim: --pause: want FROM-TO, two times into the simulation such as 10s-20s; got "2-3s"`},
		{"3s-2s", "faucet sim: --pause 3s-2s: want 0 <= FROM < TO <= --duration (5s)"},
		{"2s-2s", "faucet sim: --pause 2s-2s: want 0 <= FROM < TO <= --duration (5s)"},
		{"4s-6s", "faucet sim: --pause 4s-6s: want 0 <= FROM < TO <= --duration (5s)"},
	} {
		code, out, errs := runArgs("--duration", "5s", "--pause", tt.arg)
		if code != 2 || out != "" || errs != tt.msg+"\n" {
			t.Errorf("faucet sim --pause %s: exit %d, stdout %.40q, stderr %q; want exit 2 and %q", tt.arg, code, out, errs, tt.msg)
		}
	}
}
