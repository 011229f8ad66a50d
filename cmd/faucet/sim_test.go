package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// The worked example of a token bucket: rate 10/s, burst 50, 60 requests a
// second. The first second spends the burst plus that second's refill (59 of
// 60 admitted); after that exactly the rate, 10 a second, gets through.
func TestSimWorkedExample(t *testing.T) {
	code, out, errs := runArgs("sim", "--rate", "10", "--burst", "50", "--load", "60/s", "--duration", "5s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows := regexp.MustCompile(`(?m)^\s*(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s*$`).FindAllStringSubmatch(out, -1)
	want := [][]string{
		{"0s", "1s", "60", "59", "1"},
		{"1s", "2s", "60", "10", "50"},
		{"2s", "3s", "60", "10", "50"},
		{"3s", "4s", "60", "10", "50"},
		{"4s", "5s", "60", "10", "50"},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%s", len(rows), len(want), out)
	}
	for i, w := range want {
		if got := rows[i][1:6]; strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("row %d = %v, want %v", i, got, w)
		}
	}
	if !regexp.MustCompile(`total\s+300\s+99\s+201`).MatchString(out) {
		t.Errorf("totals line missing or wrong:\n%s", out)
	}
}

func TestSimFractionalLoadAndCost(t *testing.T) {
	// 2 tokens per request at 1 token/s, burst 4: two requests at once, then
	// one every 2 s.
	code, out, errs := runArgs("sim", "--rate", "1", "--burst", "4", "--cost", "2", "--load", "1/500ms", "--duration", "10s", "--interval", "10s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !regexp.MustCompile(`total\s+20\s+6\s+14`).MatchString(out) {
		t.Errorf("want 20 sent, 6 admitted (2 from the burst + 4 from 8 s of refill):\n%s", out)
	}
}

func TestSimSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.svg")
	code, out, errs := runArgs("sim", "--rate", "5", "--burst", "10", "--load", "20/s", "--duration", "3s", "--svg", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "chart written to "+path) {
		t.Errorf("output does not name the chart:\n%s", out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var root string
	paths := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "path" {
				paths++
			}
		}
	}
	if root != "svg" || paths < 10 {
		t.Errorf("chart root %q with %d paths, want an svg with the plots drawn", root, paths)
	}
}

func TestSimErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"sim", "--rate", "0"}, 2, "Limit must be between"},
		{[]string{"sim", "--burst", "0.5"}, 2, "Burst must be between 1 and 1e9"},
		{[]string{"sim", "--load", "fast"}, 2, "--load"},
		{[]string{"sim", "--load", "60/fortnight"}, 2, "unit"},
		{[]string{"sim", "--load", "-5/s"}, 2, "positive"},
		{[]string{"sim", "--duration", "0s"}, 2, "--duration must be positive"},
		{[]string{"sim", "--interval", "10s", "--duration", "5s"}, 2, "--interval"},
		{[]string{"sim", "--load", "1e9/s", "--duration", "1h"}, 2, "at most 10000000 requests"},
		{[]string{"sim", "extra"}, 2, "unexpected argument"},
		{[]string{"sim", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"bogus"}, 2, "unknown command"},
		{nil, 2, "usage"},
		{[]string{"sim", "--svg", "/nonexistent-dir/x.svg", "--duration", "1s"}, 1, "--svg"},
	} {
		code, _, errs := runArgs(tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet %v: exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, errs, tt.code, tt.msg)
		}
	}
	if code, out, _ := runArgs("help"); code != 0 || !strings.Contains(out, "sim") {
		t.Errorf("faucet help: exit %d, %q", code, out)
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
	code, out, errs := runArgs("sim", "--rate", "5", "--burst", "10", "--load", "500/m", "--duration", "6s")
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
		{[]string{"--rate", "10", "--burst", "5"}, "warning: --burst 5 is below --rate 10: legal but unusual; the bucket is full after 500ms of refill, so a client that pauses longer loses refill"},
		{[]string{"--rate", "10", "--burst", "10", "--cost", "10"}, ""},
	} {
		code, out, errs := runArgs(append([]string{"sim", "--duration", "2s"}, tt.args...)...)
		if code != 0 || !strings.Contains(out, "total") {
			t.Errorf("faucet sim %q: exit %d, want the simulation run", tt.args, code)
		}
		if tt.warn == "" && errs != "" || !strings.Contains(errs, tt.warn) {
			t.Errorf("faucet sim %q: stderr %q, want %q", tt.args, errs, tt.warn)
		}
	}
}
