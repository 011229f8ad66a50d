package httplimit

import (
	"net/url"
	"testing"
)

// scanParam agrees with url.ParseQuery, which the application behind the
// limiter is likely to use: on a query string it parses without error, the
// one value of a name is ParseQuery's, and a name ParseQuery gives several
// values is sent more than once; on one it fails on, scanParam reports a
// problem, since other parsers split or decode the dropped pairs their way.
func FuzzScanParam(f *testing.F) {
	for _, s := range []string{"k=a", "k=a&k=b", "k=a;k=b", "k=%zz", "%6B=a&k=b", "k=a+b&K=c", "k.x=1", "k[]=1", "=&&k", "k", "k=%41%2", "a=1&k=2&b=%20"} {
		f.Add(s, "k")
	}
	f.Fuzz(func(t *testing.T, raw, name string) {
		val, n, problem := scanParam(raw, name)
		vals, err := url.ParseQuery(raw)
		if err != nil {
			if problem == "" {
				t.Fatalf("scanParam(%q, %q): no problem, but ParseQuery fails: %v", raw, name, err)
			}
			return
		}
		if n != len(vals[name]) {
			t.Fatalf("scanParam(%q, %q): %d values, ParseQuery %d", raw, name, n, len(vals[name]))
		}
		if n > 0 {
			if v, _ := unescapeQuery(val); v != vals[name][0] {
				t.Fatalf("scanParam(%q, %q) = %q, ParseQuery %q", raw, name, v, vals[name][0])
			}
		}
	})
}
