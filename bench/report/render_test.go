package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// headingAnchors are the fragments of a Markdown document's headings.
func headingAnchors(doc string) []string {
	var out []string
	for line := range strings.Lines(doc) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			out = append(out, anchor(strings.TrimSpace(strings.TrimLeft(h, "#"))))
		}
	}
	return out
}

// linkedAnchors returns the fragments of the links in doc to target (""
// for links within doc).
func linkedAnchors(doc, target string) []string {
	re := regexp.MustCompile(`\]\(` + regexp.QuoteMeta(target) + `#([^)]+)\)`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// renderCommitted renders the run that BENCHMARKS.md names from bench/, as
// report runs, and checks that the scaling chart it draws is the one
// committed beside the results. It returns the document, the summary and
// the run's prefix.
func renderCommitted(t *testing.T) (string, []summaryRow, string) {
	committed, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Skip("no BENCHMARKS.md")
	}
	m := regexp.MustCompile("bench/(results/[^`]*)-allow\\.txt").FindSubmatch(committed)
	if m == nil {
		t.Fatal("BENCHMARKS.md names no -allow.txt results file")
	}
	prefix := string(m[1])
	t.Chdir("..")
	tmp := t.TempDir()
	old := drawChart
	defer func() { drawChart = old }()
	drawChart = func(r *results, path string) error {
		drawn := filepath.Join(tmp, filepath.Base(path))
		if err := drawScaling(r, drawn); err != nil {
			return err
		}
		got, _ := os.ReadFile(drawn)
		if want, err := os.ReadFile(path); err != nil || string(got) != string(want) {
			t.Errorf("%s is not the chart the report draws (%v)", path, err)
		}
		return nil
	}
	sum, err := summarize(prefix)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := render(prefix, sum)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc), sum, prefix
}

// The document made from the committed results opens with the summary,
// keeps no verdicts, and every link between it and docs/performance.md
// lands on a heading.
func TestRenderCommittedResults(t *testing.T) {
	doc, _, _ := renderCommitted(t)
	perf, err := os.ReadFile("../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}

	if i, j := strings.Index(doc, "\n## "+summaryHeading+"\n"), strings.Index(doc, "\n## "); i < 0 || i != j {
		t.Errorf("the first section is not the summary")
	}
	for _, verdict := range []string{"**no**", " met ", "≤"} {
		if strings.Contains(doc, verdict) {
			t.Errorf("the document has %q", verdict)
		}
	}
	for _, c := range []struct {
		name, from, target, to string
	}{
		{"BENCHMARKS.md to itself", doc, "", doc},
		{"BENCHMARKS.md to docs/performance.md", doc, performanceDoc, string(perf)},
		{"docs/performance.md to BENCHMARKS.md", string(perf), "../BENCHMARKS.md", doc},
		{"docs/performance.md to itself", string(perf), "", string(perf)},
	} {
		have := headingAnchors(c.to)
		links := linkedAnchors(c.from, c.target)
		if len(links) == 0 {
			t.Errorf("%s: no links", c.name)
		}
		for _, a := range links {
			if !slices.Contains(have, a) {
				t.Errorf("%s: #%s is no heading", c.name, a)
			}
		}
	}
}

// BENCHMARKS.md, and the summary in README.md if it has the markers, are
// what the report makes of the committed results: nobody edited them by
// hand, and nobody changed the report without regenerating them.
func TestCommittedDocumentIsGenerated(t *testing.T) {
	doc, sum, prefix := renderCommitted(t)
	regenerate := "cd bench && go run ./report -prefix " + prefix + " -out ../BENCHMARKS.md -readme ../README.md"
	if committed, _ := os.ReadFile("../BENCHMARKS.md"); string(committed) != doc {
		t.Errorf("BENCHMARKS.md is not what the report makes of %s; run\n\t%s", prefix, regenerate)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil || !strings.Contains(string(readme), beginMarker) {
		return
	}
	regenerated, err := replaceBetween(readme, readmeTable(sum, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(regenerated) != string(readme) {
		t.Errorf("README.md's summary is not what the report makes of %s; run\n\t%s", prefix, regenerate)
	}
}
