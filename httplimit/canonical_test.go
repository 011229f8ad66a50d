package httplimit

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

func TestCanonicalPath(t *testing.T) {
	keep := PathOptions{KeepEncodedSlashes: true}
	semi := PathOptions{AllowSemicolons: true}
	fold := PathOptions{FoldCase: true}
	trim := PathOptions{TrimTrailingSlash: true}
	for _, tc := range []struct {
		in   string
		opts PathOptions
		want string // "" with err
		err  string // a part of the problem
	}{
		{in: "/api/x", want: "/api/x"},
		{in: "", want: "/"},
		{in: "/", want: "/"},
		{in: "//api/x", want: "/api/x"},
		{in: "///api/x", want: "/api/x"},
		{in: "/./api/x", want: "/api/x"},
		{in: "/.//api/x", want: "/api/x"},
		{in: "/x/../api/x", want: "/api/x"},
		{in: "/api/../api/x", want: "/api/x"},
		{in: "/%2e/api/x", want: "/api/x"},
		{in: "/%2E%2E/api/x", want: "/api/x"},
		{in: "/%2e%2E/api/x", want: "/api/x"},
		{in: "/z/%2e%2e/api/x", want: "/api/x"},
		{in: "/%61pi/x", want: "/api/x"},
		{in: "/%7e%2D%5f", want: "/~-_"},
		{in: "/a//../b", want: "/b"}, // slashes merged first, as nginx and path.Clean do
		// Decoded once: %25 is a literal "%", so %252e is "%2e", not a dot.
		{in: "/%252e/api", want: "/%252e/api"},
		{in: "/%252e%252e/api", want: "/%252e%252e/api"},
		{in: "/..", want: "/"},
		{in: "/../../a", want: "/a"},
		{in: "/a/b/..", want: "/a/"},
		{in: "/a/.", want: "/a/"},
		{in: "/a/b/", want: "/a/b/"},
		{in: "/a/b//", want: "/a/b/"},
		{in: "/a/b/", opts: trim, want: "/a/b"},
		{in: "/a/b/..", opts: trim, want: "/a"},
		{in: "/", opts: trim, want: "/"},
		{in: "/..", opts: trim, want: "/"},
		{in: "/...", want: "/..."},
		{in: "/.a/..b", want: "/.a/..b"},
		{in: "/a%2fb", err: "encoded slash"},
		{in: "/a%2Fb", err: "encoded slash"},
		{in: "/a%5cb", err: "encoded slash"},
		{in: `/a\b`, err: "backslash"},
		{in: "/a%2fb/..", opts: keep, want: "/"},
		{in: "/a%2f..%2fb", opts: keep, want: "/a%2F..%2Fb"},
		{in: `/a\b`, opts: keep, want: "/a%5Cb"},
		{in: "/a;b", err: `";"`},
		{in: "/a%3bb", err: `";"`},
		{in: "/a;b", opts: semi, want: "/a;b"},
		{in: "/a%3bb", opts: semi, want: "/a%3Bb"},
		{in: "/a%00", err: "NUL"},
		{in: "/a%zz", err: "malformed"},
		{in: "/a%2", err: "malformed"},
		{in: "/a%", err: "malformed"},
		{in: "/a\x01", err: "control"},
		{in: "/a\x7f", err: "control"},
		{in: "*", err: "asterisk"},
		{in: "api/x", err: `start with "/"`},
		{in: "/a b", want: "/a%20b"},
		{in: "/a%20b", want: "/a%20b"},
		{in: "/a?b#c", want: "/a%3Fb%23c"},
		{in: "/caf\xc3\xa9", want: "/caf%C3%A9"},
		{in: "/caf%c3%a9", want: "/caf%C3%A9"},
		{in: "/a%0a", want: "/a%0A"},
		{in: "/!$&'()*+,=:@", want: "/!$&'()*+,=:@"},
		{in: "/%21%40", want: "/%21%40"}, // reserved escapes stay escaped
		{in: "/API/X", opts: fold, want: "/api/x"},
		{in: "/%41PI", opts: fold, want: "/api"},
		{in: "/CAF%C3%89", opts: fold, want: "/caf%C3%A9"},
		{in: "/%E2%84%AA", opts: fold, want: "/k"}, // the Kelvin sign
		{in: "/%C3", opts: fold, want: "/%C3"},     // not UTF-8: kept
		{in: "/A%2FB", opts: PathOptions{FoldCase: true, KeepEncodedSlashes: true}, want: "/a%2Fb"},
	} {
		got, err := CanonicalPath(tc.in, tc.opts)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CanonicalPath(%q, %+v) = %q, %v; want an error about %s", tc.in, tc.opts, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalPath(%q, %+v) = %q, %v; want %q", tc.in, tc.opts, got, err, tc.want)
			continue
		}
		if again, err := CanonicalPath(got, tc.opts); err != nil || again != got {
			t.Errorf("CanonicalPath(%q) = %q, %v; want itself", got, again, err)
		}
	}
}

// The fast path says canonical only of paths the slow path keeps as they are.
func TestIsCanonicalAgreesWithTheSlowPath(t *testing.T) {
	for _, p := range []string{"/", "/api/x", "/a/", "/a%20b", "/a%2Fb", "/a;b", "/a%3Bb", "/A", "/%C3%A9", "/a.b/.c", "/~x", "/a%25"} {
		for _, o := range allPathOptions() {
			if !isCanonical(p, o) {
				continue
			}
			got, err := canonicalize(p, o)
			if err != nil || got != p {
				t.Errorf("isCanonical(%q, %+v) but canonicalize = %q, %v", p, o, got, err)
			}
		}
	}
}

func allPathOptions() []PathOptions {
	var all []PathOptions
	for m := 0; m < 16; m++ {
		all = append(all, PathOptions{KeepEncodedSlashes: m&1 != 0, AllowSemicolons: m&2 != 0, FoldCase: m&4 != 0, TrimTrailingSlash: m&8 != 0})
	}
	return all
}

// Folding is a function of the orbit, and folding a folded rune changes
// nothing: both are what make the folded path canonical.
func TestFoldRuneIsCanonical(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		f := foldRune(r)
		if foldRune(f) != f {
			t.Fatalf("foldRune(%U) = %U, whose fold is %U", r, f, foldRune(f))
		}
		if s := unicode.SimpleFold(r); foldRune(s) != f {
			t.Fatalf("foldRune(%U) = %U, but foldRune(%U) = %U", r, f, s, foldRune(s))
		}
	}
}

// decodedCanonical judges a decoded path as CanonicalPath judges the
// escaping url.URL gives it: every byte, in a few segment shapes, under
// every option. It pins what url.URL escapes in a path, which it assumes.
func TestDecodedCanonicalAgreesWithEscapedPath(t *testing.T) {
	var paths []string
	for c := 0; c < 256; c++ {
		for _, f := range []string{"/a%sb", "/%s", "/%s/", "/x/%s%s"} {
			paths = append(paths, strings.ReplaceAll(f, "%s", string([]byte{byte(c)})))
		}
	}
	paths = append(paths, "", "/", "//", "/a/", "/a//b", "/./a", "/a/.", "/a/..", "/..", "/.a", "/a..", "*", "a")
	for _, p := range paths {
		for _, o := range allPathOptions() {
			u := url.URL{Path: p}
			raw := u.EscapedPath()
			c, err := CanonicalPath(raw, o)
			want := raw != "" && err == nil && c == raw
			// False for a byte above 0x7F under FoldCase is only cautious:
			// whether it folds is the slow path's to find.
			cautious := o.FoldCase && strings.IndexFunc(p, func(r rune) bool { return r >= 0x80 }) >= 0
			if got := decodedCanonical(p, o); got != want && !(cautious && !got) {
				t.Errorf("decodedCanonical(%q, %+v) = %v; EscapedPath %q, CanonicalPath %q, %v", p, o, got, raw, c, err)
			}
		}
	}
}
