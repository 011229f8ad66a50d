package main

import (
	"fmt"
	"strings"
)

// shapesHeading is the heading of BenchmarkShapes.
const shapesHeading = "Shapes of limit: a check beside the token bucket's"

// shapesSection renders BenchmarkShapes from the newest
// results/*-shapes.txt (bench/shapes.sh), or "" if there is none: the
// benchstat table, and each shape's median time per check against the
// token bucket's of the same run.
func shapesSection(dir string) (string, error) {
	file, r, err := newest(dir, "-shapes.txt")
	if file == "" || err != nil {
		return "", err
	}
	base, ok := r.medianOf("sec/op", "bench", "Shapes", "shape", "token_bucket")
	if !ok {
		return "", nil
	}
	table, err := benchstat(file)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	section(&b, 2, shapesHeading, file)
	b.WriteString("| shape | time per check | ÷ token bucket |\n|---|---|---|\n")
	for _, shape := range r.distinct("shape", "bench", "Shapes") {
		v, _ := r.medianOf("sec/op", "bench", "Shapes", "shape", shape)
		fmt.Fprintf(&b, "| %s | %.1f ns | %.2f× |\n", shape, v*1e9, v/base)
	}
	b.WriteString("\n")
	codeBlock(&b, table)
	return b.String(), nil
}
