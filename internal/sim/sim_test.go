package sim

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// runArgs runs faucet sim with args.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main("faucet sim", args, &out, &errb)
	return code, out.String(), errb.String()
}

// The worked example of a token bucket: rate 10/s, burst 50, 60 requests a
// second. The first second spends the burst plus that second's refill (59 of
// 60 admitted); after that exactly the rate, 10 a second, gets through.
// After each second's last request, at 59/60 s past the second, the bucket
// holds the 5/6 of a token refilled since the last admission at .9 s: it is
// drained, though a full token is due at the second itself.
func TestSimWorkedExample(t *testing.T) {
	code, out, errs := runArgs("--rate", "10", "--burst", "50", "--load", "60/s", "--duration", "5s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkRows(t, out, [][]string{
		{"0s", "1s", "60", "59", "1", "0.833"},
		{"1s", "2s", "60", "10", "50", "0.833"},
		{"2s", "3s", "60", "10", "50", "0.833"},
		{"3s", "4s", "60", "10", "50", "0.833"},
		{"4s", "5s", "60", "10", "50", "0.833"},
	})
	if !regexp.MustCompile(`total\s+300\s+99\s+201`).MatchString(out) {
		t.Errorf("totals line missing or wrong:\n%s", out)
	}
}

func TestSimFractionalLoadAndCost(t *testing.T) {
	// 2 tokens per request at 1 token/s, burst 4: two requests at once, then
	// one every 2 s.
	code, out, errs := runArgs("--rate", "1", "--burst", "4", "--cost", "2", "--load", "1/500ms", "--duration", "10s", "--interval", "10s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !regexp.MustCompile(`total\s+20\s+6\s+14`).MatchString(out) {
		t.Errorf("want 20 sent, 6 admitted (2 from the burst + 4 from 8 s of refill):\n%s", out)
	}
}

func TestSimSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.svg")
	code, out, errs := runArgs("--rate", "5", "--burst", "10", "--load", "20/s", "--duration", "3s", "--svg", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "chart written to "+path) {
		t.Errorf("output does not name the chart:\n%s", out)
	}
	svg := readSVG(t, path)
	if svg.root != "svg" || svg.paths < 10 {
		t.Errorf("chart root %q with %d paths, want an svg with the plots drawn", svg.root, svg.paths)
	}
	if svg.dashed != 0 || slices.ContainsFunc(svg.texts, func(s string) bool { return strings.Contains(s, "→") }) {
		t.Errorf("chart without --set-limit has %d dashed paths and texts %q, want no marks of changes", svg.dashed, svg.texts)
	}
}

// svgChart is what the tests read of a chart.
type svgChart struct {
	root          string   // the root element's name
	paths, dashed int      // path elements, and those with dashes
	paused        int      // rect elements that shade a pause
	texts         []string // the text elements' contents, in order
}

// readSVG parses the chart at path, failing t if it is not well-formed.
func readSVG(t *testing.T, path string) svgChart {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var c svgChart
	var inText bool
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if c.root == "" {
				c.root = tok.Name.Local
			}
			switch tok.Name.Local {
			case "path":
				c.paths++
				for _, a := range tok.Attr {
					if a.Name.Local == "style" && strings.Contains(a.Value, "stroke-dasharray") {
						c.dashed++
					}
				}
			case "rect":
				for _, a := range tok.Attr {
					if a.Name.Local == "style" && a.Value == pauseStyle {
						c.paused++
					}
				}
			case "text":
				inText = true
				c.texts = append(c.texts, "")
			}
		case xml.CharData:
			if inText {
				c.texts[len(c.texts)-1] += string(tok)
			}
		case xml.EndElement:
			inText = false
		}
	}
	return c
}

// simRows are the report's rows: from, to, sent, admitted, denied, tokens
// at end.
func simRows(out string) [][]string {
	var rows [][]string
	for _, m := range regexp.MustCompile(`(?m)^\s*(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s*$`).FindAllStringSubmatch(out, -1) {
		rows = append(rows, m[1:])
	}
	return rows
}

// checkRows fails t unless out reports the rows want, each compared in as
// many columns as it has.
func checkRows(t *testing.T, out string, want [][]string) {
	t.Helper()
	rows := simRows(out)
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%s", len(rows), len(want), out)
	}
	for i, w := range want {
		if got := rows[i][:len(w)]; strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("row %d = %v, want %v", i, got, w)
		}
	}
}

// After each --set-limit, exactly the new rate gets through, from the
// change's time on. The first second spends the burst, 30, plus 59/60 s of
// refill at 10/s (9 tokens).
func TestSimSetLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		head string // how the report starts
		rows [][]string
	}{{
		// 60 requests a second at 10/s, then 30/s from 2 s and 5/s from
		// 4 s: 10, 30 and 5 a second, in whatever order the changes are
		// given.
		name: "steps",
		args: []string{"--rate", "10", "--set-limit", "4s=5/s", "--set-limit", "2s=30/s"},
		head: "rate 10/s, burst 30, load 60/s (cost 1), 6s in steps of 1s\nat 2s: limit → 30/s\nat 4s: limit → 5/s\n\n",
		rows: [][]string{
			{"0s", "1s", "60", "39", "21"},
			{"1s", "2s", "60", "10", "50"},
			{"2s", "3s", "60", "30", "30"},
			{"3s", "4s", "60", "30", "30"},
			{"4s", "5s", "60", "5", "55"},
			{"5s", "6s", "60", "5", "55"},
		},
	}, {
		// Changes within an interval take effect at their time, between the
		// interval's requests, not at its bounds: 2 s to 4 s admits 1 s at
		// 10/s and 1 s at 30/s; 4 s to 6 s, 0.5 s at 30/s and 1.5 s at 600/m.
		name: "within an interval",
		args: []string{"--rate", "10", "--interval", "2s", "--set-limit", "3s=30/s", "--set-limit", "4.5s=600/m"},
		rows: [][]string{
			{"0s", "2s", "120", "49", "71"},
			{"2s", "4s", "120", "40", "80"},
			{"4s", "6s", "120", "30", "90"},
		},
	}, {
		// A change between requests counts from its time in the tokens
		// left at the end of an interval without requests: the one request
		// drains the bucket at 0 s (0 left), which holds 0.5 s at 1/s plus
		// 1.5 s at 2/s at 2 s.
		name: "between requests",
		args: []string{"--rate", "1", "--burst", "10", "--cost", "10", "--load", "1/2s", "--duration", "2s", "--set-limit", "0.5s=2/s"},
		rows: [][]string{{"0s", "1s", "1", "1", "0", "0.000"}, {"1s", "2s", "0", "0", "0", "3.500"}},
	}, {
		// A change at 0 s is the same as that --rate.
		name: "at 0 s",
		args: []string{"--rate", "1", "--duration", "3s", "--set-limit", "0s=600/m"},
		rows: [][]string{{"0s", "1s", "60", "39", "21"}, {"1s", "2s", "60", "10", "50"}, {"2s", "3s", "60", "10", "50"}},
	}, {
		// --rate takes the same syntax as RATE.
		name: "--rate per unit",
		args: []string{"--rate", "600/m", "--duration", "3s"},
		head: "rate 600/m, burst 30, load 60/s (cost 1), 3s in steps of 1s\n\n",
		rows: [][]string{{"0s", "1s", "60", "39", "21"}, {"1s", "2s", "60", "10", "50"}, {"2s", "3s", "60", "10", "50"}},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runArgs(append([]string{"--burst", "30", "--load", "60/s", "--duration", "6s"}, tt.args...)...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			checkRows(t, out, tt.rows)
			if !strings.HasPrefix(out, tt.head) {
				t.Errorf("report starts %q, want %q", out[:min(len(out), len(tt.head))], tt.head)
			}
		})
	}
}

func TestSimSetLimitSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.svg")
	code, _, errs := runArgs("--rate", "10/s", "--burst", "50", "--load", "60/s", "--duration", "60s",
		"--set-limit", "20s=30/s", "--set-limit", "40s=5/s", "--svg", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	svg := readSVG(t, path)
	var labels []string
	for _, s := range svg.texts {
		if strings.HasPrefix(s, "limit") {
			labels = append(labels, s)
		}
	}
	if want := []string{"limit → 30/s", "limit → 5/s"}; !slices.Equal(labels, want) {
		t.Errorf("chart labels the changes %q, want %q", labels, want)
	}
	// A mark across each panel at each change.
	if svg.dashed != 4 {
		t.Errorf("chart has %d dashed paths, want 4: a mark for each of 2 changes in each of 2 panels", svg.dashed)
	}
	for _, want := range []string{"rate 10/s (changes marked), burst 50, load 60/s", "rate"} {
		if !slices.Contains(svg.texts, want) {
			t.Errorf("chart has no text %q: %q", want, svg.texts)
		}
	}
}

// Every malformed or out-of-range --set-limit is refused before anything
// is simulated or warned of, exit status 2, with one line that names the
// flag and what it accepts.
func TestSimSetLimitErrors(t *testing.T) {
	for _, tt := range []struct {
		changes []string
		msg     string
	}{
		{[]string{"20s"}, `faucet sim: --set-limit: want AT=RATE, a time into the simulation and the rate from then, such as 20s=30/s; got "20s"`},
		{[]string{"=30/s"}, `faucet sim: --set-limit =30/s: AT: want a duration such as 20s, got ""`},
		{[]string{"2=30/s"}, `faucet sim: --set-limit 2=30/s: AT: want a duration such as 20s, got "2"`},
		{[]string{"-1s=30/s"}, "faucet sim: --set-limit -1s=30/s: AT must be from 0 to --duration (5s), got -1s"},
		{[]string{"5001ms=30/s"}, "faucet sim: --set-limit 5001ms=30/s: AT must be from 0 to --duration (5s), got 5.001s"},
		{[]string{"2s="}, `faucet sim: --set-limit 2s=: RATE: want a number of tokens per second such as 10, or per unit such as 10/s, 600/m or 1/250ms, got ""`},
		{[]string{"2s=fast"}, `RATE: want a number of tokens per second such as 10, or per unit such as 10/s, 600/m or 1/250ms, got "fast"`},
		{[]string{"2s=30/fortnight"}, `faucet sim: --set-limit 2s=30/fortnight: RATE: want a unit s, m, h or a duration such as 250ms after '/', got "fortnight"`},
		{[]string{"2s=0"}, "faucet sim: --set-limit 2s=0: engine: invalid config: Limit must be between 1/31622400 (one token per 366 days) and 1e9 tokens per second, got 0"},
		{[]string{"2s=-5/s"}, "--set-limit 2s=-5/s: engine: invalid config: Limit must be between"},
		{[]string{"2s=2e9/s"}, "--set-limit 2s=2e9/s: engine: invalid config: Limit must be between"},
		{[]string{"2s=NaN"}, "--set-limit 2s=NaN: engine: invalid config: Limit must be between"},
		// With the burst of 50: an empty bucket would refill in 50 years.
		{[]string{"2s=1/8784h"}, "--set-limit 2s=1/8784h: engine: invalid config: Burst/Limit must be at most 366 days (31622400 s), the time to refill an empty bucket"},
		{[]string{"1s=30/s", "3s=20/s", "1s=5/s"}, "faucet sim: --set-limit 1s=5/s: 1s is also the time of --set-limit 1s=30/s; give one rate per time"},
		{[]string{"1s=30/s", "3s=oops"}, "--set-limit 3s=oops: RATE"},
	} {
		args := []string{"--burst", "50", "--duration", "5s"}
		for _, c := range tt.changes {
			args = append(args, "--set-limit", c)
		}
		code, out, errs := runArgs(args...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("faucet %q: exit %d, stdout %.40q, stderr %q; want exit 2, no output, one line with %q", args, code, out, errs, tt.msg)
		}
	}
	// The bounds themselves are in range.
	for _, c := range []string{"0s=30/s", "5s=30/s", "2s=1/8784h"} {
		if code, _, errs := runArgs("--burst", "1", "--duration", "5s", "--set-limit", c); code != 0 {
			t.Errorf("faucet sim --burst 1 --set-limit %s: exit %d, stderr %q", c, code, errs)
		}
	}
}

func TestParseChanges(t *testing.T) {
	got, err := parseChanges([]string{"40s=5/s", " 20s = 30/s ", "0s=600/m", "1m=7"}, time.Minute, 50)
	if err != nil {
		t.Fatal(err)
	}
	want := []limitChange{
		{at: 0, rate: 10, text: "600/m", arg: "0s=600/m"},
		{at: 20 * time.Second, rate: 30, text: "30/s", arg: " 20s = 30/s "},
		{at: 40 * time.Second, rate: 5, text: "5/s", arg: "40s=5/s"},
		{at: time.Minute, rate: 7, text: "7/s", arg: "1m=7"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseChanges = %+v, want %+v", got, want)
	}
}

func TestSimErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--rate", "0"}, 2, "Limit must be between"},
		{[]string{"--burst", "0.5"}, 2, "Burst must be between 1 and 1e9"},
		{[]string{"--rate", "-1/s"}, 2, "Limit must be between"},
		{[]string{"--rate", "fast"}, 2, `--rate: want a number of tokens per second such as 10, or per unit such as 10/s, 600/m or 1/250ms, got "fast"`},
		{[]string{"--rate", "10/fortnight"}, 2, "unit"},
		{[]string{"--load", "fast"}, 2, "--load"},
		{[]string{"--load", "60/fortnight"}, 2, "unit"},
		{[]string{"--load", "-5/s"}, 2, "positive"},
		{[]string{"--duration", "0s"}, 2, "--duration must be positive"},
		{[]string{"--interval", "10s", "--duration", "5s"}, 2, "--interval"},
		{[]string{"--load", "1e9/s", "--duration", "1h"}, 2, "at most 10000000 requests"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"--svg", "/nonexistent-dir/x.svg", "--duration", "1s"}, 1, "--svg"},
	} {
		code, _, errs := runArgs(tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet %v: exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, errs, tt.code, tt.msg)
		}
	}
}

func TestParseLoad(t *testing.T) {
	for _, tt := range []struct {
		in   string
		rate float64
		text string
	}{{"60/s", 60, "60/s"}, {"600/m", 10, "600/m"}, {"7200/h", 2, "7200/h"}, {"3/250ms", 12, "3/250ms"}, {"5", 5, "5/s"}, {" 0.5/s ", 0.5, "0.5/s"}} {
		if rate, text, err := parseLoad(tt.in); err != nil || rate != tt.rate || text != tt.text {
			t.Errorf("parseLoad(%q) = %v, %q, %v; want %v, %q", tt.in, rate, text, err, tt.rate, tt.text)
		}
	}
}

// The load is reported as it was given, not as a float of requests per
// second (500/m used to read 8.333333333333334/s).
func TestSimReportsTheLoadAsGiven(t *testing.T) {
	code, out, errs := runArgs("--rate", "5", "--burst", "10", "--load", "500/m", "--duration", "6s")
	if code != 0 || !strings.HasPrefix(out, "rate 5/s, burst 10, load 500/m (cost 1),") || errs != "" {
		t.Errorf("exit %d, stdout %.60q, stderr %q; want the load as 500/m", code, out, errs)
	}
}

// Legal settings that are probably mistakes are simulated, with a warning
// on stderr saying what they mean.
func TestSimWarnings(t *testing.T) {
	for _, tt := range []struct {
		args []string
		warn string // "" for none
	}{
		{[]string{"--rate", "10", "--burst", "50", "--cost", "60"}, "warning: --cost 60 is above --burst 50: the bucket never holds that many tokens, so every request will be denied"},
		{[]string{"--rate", "10", "--burst", "5"}, "warning: --burst 5 is below --rate 10/s: legal but unusual; the bucket is full after 500ms of refill, so a client that pauses longer loses refill"},
		{[]string{"--rate", "10", "--burst", "10", "--cost", "10"}, ""},
		{[]string{"--rate", "10", "--burst", "20", "--set-limit", "1s=40/s"}, "warning: --burst 20 is below --set-limit 1s=40/s: legal but unusual; the bucket is full after 500ms of refill"},
		{[]string{"--rate", "10", "--burst", "20", "--set-limit", "1s=20/s"}, ""},
	} {
		code, out, errs := runArgs(append([]string{"--duration", "2s"}, tt.args...)...)
		if code != 0 || !strings.Contains(out, "total") {
			t.Errorf("faucet sim %q: exit %d, want the simulation run", tt.args, code)
		}
		if tt.warn == "" && errs != "" || !strings.Contains(errs, tt.warn) {
			t.Errorf("faucet sim %q: stderr %q, want %q", tt.args, errs, tt.warn)
		}
	}
}

// The usage and every error name the command as it was given: faucet sim
// in the faucet command, sim in the light one.
func TestMainNamesTheCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main("sim", []string{"-h"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "usage: sim [flags]\n") || errb.Len() != 0 {
		t.Errorf("sim -h: exit %d, stdout %.40q, stderr %q; want exit 0 and the usage of sim on stdout", code, out.String(), errb.String())
	}
	out.Reset()
	if code := Main("sim", []string{"--rate", "fast"}, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), "sim: --rate: ") || out.Len() != 0 {
		t.Errorf("sim --rate fast: exit %d, stdout %q, stderr %q; want exit 2 and an error starting \"sim: --rate: \"", code, out.String(), errb.String())
	}
}
