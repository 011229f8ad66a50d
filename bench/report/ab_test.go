package main

import (
	"slices"
	"testing"
)

// Every significantly slower row is named, with its change, not only the
// first; faster rows and rows within the noise are not.
func TestSlowerRowsNamesEvery(t *testing.T) {
	table := `                              │   a.txt    │               b.txt                │
                              │   sec/op   │   sec/op     vs base               │
Allow/scen=hot/mode=deny-2      54.70n ± 1%   55.22n ± 4%   +0.95% (p=0.029 n=10)
Allow/scen=many/mode=allow-2    427.0n ± 3%   253.0n ± 6%  -40.74% (p=0.000 n=10)
Allow/scen=par-hot/mode=allow-2 104.5n ± 16%  107.2n ± 6%        ~ (p=0.971 n=10)
Allow/scen=par-distinct/mode=allow-2 37.70n ± 12% 46.88n ± 7% +24.37% (p=0.000 n=10)
geomean                         84.79n        78.16n         -7.82%`
	want := []string{"Allow/scen=hot/mode=deny-2 (+0.95%)", "Allow/scen=par-distinct/mode=allow-2 (+24.37%)"}
	if got := slowerRows(table); !slices.Equal(got, want) {
		t.Errorf("slowerRows = %q, want %q", got, want)
	}
}
