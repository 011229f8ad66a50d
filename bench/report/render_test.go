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

// The document made from the committed results opens with the summary,
// keeps no verdicts, and every link between it and docs/performance.md
// lands on a heading.
func TestRenderCommittedResults(t *testing.T) {
	metas, _ := filepath.Glob("../results/*-meta.txt")
	if len(metas) == 0 {
		t.Skip("no committed results")
	}
	// A copy, as render draws the scaling chart beside the results.
	dir := t.TempDir()
	files, _ := filepath.Glob("../results/*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(metas)
	prefix := filepath.Join(dir, strings.TrimSuffix(filepath.Base(metas[len(metas)-1]), "-meta.txt"))
	sum, err := summarize(prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := render(prefix, sum)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	perf, err := os.ReadFile("../../docs/performance.md")
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
