package fuzz

import (
	"errors"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/faucetgo/faucet/httplimit"
)

const (
	unreservedSet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	subDelimsSet  = "!$&'()*+,;=" // RFC 3986 section 2.2
)

var (
	slashRuns   = regexp.MustCompile(`/+`)
	asciiEscape = regexp.MustCompile(`%[0-7][0-9A-F]`)
)

// referencePath is CanonicalPath as its documentation states it, built
// from RFC 3986 step by step: percent-encoding normalisation (sections
// 2.1, 2.3 and 6.2.2), slashes merged, remove_dot_segments (section 5.2.4,
// transcribed rule by rule), then case and trailing slash.
func referencePath(raw string, o httplimit.PathOptions) (string, error) {
	if raw == "" {
		return "/", nil
	}
	if raw[0] != '/' {
		return "", errors.New("not absolute")
	}
	escape := func(c byte) string { return "%" + strings.ToUpper(strconv.FormatUint(uint64(c)|0x100, 16)[1:]) }
	var norm strings.Builder
	for i := 0; i < len(raw); i++ {
		c, escaped := raw[i], false
		if c == '%' {
			if i+3 > len(raw) {
				return "", errors.New("short escape")
			}
			v, err := strconv.ParseUint(raw[i+1:i+3], 16, 8)
			if err != nil || strings.ContainsAny(raw[i+1:i+3], "+-_xX") {
				return "", errors.New("bad escape")
			}
			c, escaped = byte(v), true
			i += 2
		}
		switch {
		case c == 0:
			return "", errors.New("NUL")
		case !escaped && (c < 0x20 || c == 0x7f):
			return "", errors.New("control")
		case c == '\\' || escaped && c == '/':
			if !o.KeepEncodedSlashes {
				return "", errors.New("slash")
			}
			norm.WriteString(escape(c))
		case c == ';' && !o.AllowSemicolons:
			return "", errors.New("semicolon")
		case c == '/':
			norm.WriteByte('/')
		case strings.IndexByte(unreservedSet, c) >= 0:
			norm.WriteByte(c)
		case !escaped && (strings.IndexByte(subDelimsSet, c) >= 0 || c == ':' || c == '@'):
			norm.WriteByte(c)
		default:
			norm.WriteString(escape(c))
		}
	}
	in := slashRuns.ReplaceAllString(norm.String(), "/")

	out := ""
	removeLast := func() {
		if i := strings.LastIndexByte(out, '/'); i >= 0 {
			out = out[:i]
		} else {
			out = ""
		}
	}
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"): // A
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"): // B
			in = "/" + in[3:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"): // C
			in = "/" + in[4:]
			removeLast()
		case in == "/..":
			in = "/"
			removeLast()
		case in == "." || in == "..": // D
			in = ""
		default: // E
			n := strings.IndexByte(in[1:], '/') + 1
			if n == 0 {
				n = len(in)
			}
			out, in = out+in[:n], in[n:]
		}
	}

	if o.FoldCase {
		// An escaped ASCII byte is never a letter, nor part of a UTF-8
		// sequence: the pieces between them fold on their own.
		var b strings.Builder
		last := 0
		for _, m := range asciiEscape.FindAllStringIndex(out, -1) {
			b.WriteString(referenceFold(out[last:m[0]]) + out[m[0]:m[1]])
			last = m[1]
		}
		out = b.String() + referenceFold(out[last:])
	}
	if o.TrimTrailingSlash && len(out) > 1 {
		out = strings.TrimSuffix(out, "/")
	}
	return out, nil
}

// referenceFold folds a piece of a normalised path without escaped ASCII
// bytes: bytes above 0x7F are decoded,
// each rune replaced by the lower case of the least rune of its simple
// folding orbit, and the path escaped again.
func referenceFold(p string) string {
	var dec []byte
	for i := 0; i < len(p); i++ {
		if v, err := strconv.ParseUint(p[i+1:min(i+3, len(p))], 16, 8); p[i] == '%' && err == nil && v >= 0x80 {
			dec = append(dec, byte(v))
			i += 2
			continue
		}
		dec = append(dec, p[i])
	}
	var folded []byte
	for len(dec) > 0 {
		r, n := utf8.DecodeRune(dec)
		if r != utf8.RuneError || n > 1 {
			orbit := []rune{r}
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				orbit = append(orbit, f)
			}
			r = unicode.ToLower(slices.Min(orbit))
			folded = utf8.AppendRune(folded, r)
		} else {
			folded = append(folded, dec[0])
		}
		dec = dec[n:]
	}
	var b strings.Builder
	for _, c := range folded {
		if c >= 0x80 {
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c), 16)))
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// CanonicalPath is the reference resolver's exact model, under every
// combination of options; its result is canonical (a fixed point, with no
// empty or dot segment), and decoded it is a path that path.Clean keeps.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{"/api/x", "//api/x", "/./api/x", "/x/../api/x", "/%2e/api/x", "/%2E%2E/api/x", "///api/x",
		"/api/../api/x", "/.//api/x", "/z/%2e%2e/api/x", "/%2fapi/x", "/%61pi/x", "/%252e/x", "/a%00", "/a%zz", "*", "",
		"/..", "/a/b/..", "/a/.", `/a\b`, "/a;b", "/a%3bb", "/CAF%C3%89/", "/%E2%84%AA", "/a%c3", "/a b?#", "/a/%2e%2e%2f"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(15))
	}
	f.Fuzz(func(t *testing.T, raw string, bits uint8) {
		o := httplimit.PathOptions{KeepEncodedSlashes: bits&1 != 0, AllowSemicolons: bits&2 != 0, FoldCase: bits&4 != 0, TrimTrailingSlash: bits&8 != 0}
		got, err := httplimit.CanonicalPath(raw, o)
		want, werr := referencePath(raw, o)
		if (err != nil) != (werr != nil) || got != want {
			t.Fatalf("CanonicalPath(%q, %+v) = %q, %v; the reference gives %q, %v", raw, o, got, err, want, werr)
		}
		if err != nil {
			var pe *httplimit.PathError
			if !errors.As(err, &pe) || pe.Problem == "" {
				t.Fatalf("CanonicalPath(%q): error %v is not a PathError that says something", raw, err)
			}
			return
		}
		if again, err := httplimit.CanonicalPath(got, o); err != nil || again != got {
			t.Fatalf("CanonicalPath(%q) = %q, whose canonical form is %q, %v", raw, got, again, err)
		}
		if !strings.HasPrefix(got, "/") || strings.Contains(got, "//") || strings.Contains(got, "/./") || strings.Contains(got, "/../") ||
			strings.HasSuffix(got, "/.") || strings.HasSuffix(got, "/..") {
			t.Fatalf("CanonicalPath(%q) = %q: an empty or dot segment is left", raw, got)
		}
		if !o.KeepEncodedSlashes {
			dec, err := url.PathUnescape(got)
			if err != nil {
				t.Fatalf("CanonicalPath(%q) = %q, which does not decode: %v", raw, got, err)
			}
			if c := path.Clean(dec); c != strings.TrimSuffix(dec, "/") && c != dec {
				t.Fatalf("CanonicalPath(%q) = %q decodes to %q, which path.Clean makes %q", raw, got, dec, c)
			}
		}
	})
}
