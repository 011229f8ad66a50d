package httplimit

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PathOptions chooses how CanonicalPath treats the spellings that servers
// disagree on. The zero value refuses every one of them.
type PathOptions struct {
	// KeepEncodedSlashes accepts %2F, %5C and a raw backslash, as data
	// within a segment (a backslash is written %5C), instead of refusing
	// them: an upstream that decodes them into separators before routing
	// would then see another path than the limiter.
	KeepEncodedSlashes bool
	// AllowSemicolons accepts ";" and %3B; otherwise they are refused,
	// since some servers cut a segment at ";" (path parameters) and others
	// do not.
	AllowSemicolons bool
	// FoldCase folds the path's case (Unicode simple case folding, to
	// lower case), for upstreams that route without regard to case.
	FoldCase bool
	// TrimTrailingSlash removes a trailing slash, but not the root's.
	TrimTrailingSlash bool
}

// PathError says why a path cannot be made canonical.
type PathError struct {
	Path    string
	Problem string
}

func (e *PathError) Error() string {
	return "httplimit: path " + strconv.Quote(e.Path) + ": " + e.Problem
}

// CanonicalPath returns the one spelling of the request path raw (as sent,
// percent-escapes and all, without the query) that every spelling of the
// same resource shares, or a *PathError if raw has none:
//
//   - the escapes of unreserved characters (letters, digits, "-._~") are
//     decoded, exactly once: %252e is the three characters "%2e", never a
//     dot; every other escape stays, with upper-case hex digits; a byte
//     that may not appear raw in a path (a space, "%", "?", "#", a byte
//     above 0x7F...) is escaped;
//   - runs of slashes become one, then the dot segments are removed as RFC
//     3986 section 5.2.4 does, so ".." above the root stays at the root;
//     "." and ".." count whether written raw or escaped;
//   - an empty path is "/"; a path that does not start with "/" (such as
//     "*") is refused, and so are %00, a malformed escape, a control
//     character, %2F, %5C and "\" (unless KeepEncodedSlashes), ";" and
//     %3B (unless AllowSemicolons);
//   - with FoldCase, letters are folded to lower case; with
//     TrimTrailingSlash, a trailing slash is removed.
//
// Decoding the result once gives the path as the limiter's rules see it;
// the result itself is what an upstream should be sent. A path that is
// already canonical is returned as it is, without allocating.
func CanonicalPath(raw string, opts PathOptions) (string, error) {
	if raw == "" {
		return "/", nil
	}
	if isCanonical(raw, opts) {
		return raw, nil
	}
	return canonicalize(raw, opts)
}

// unreserved reports whether c is an RFC 3986 unreserved character: its
// escape and itself are the same.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// literal reports whether c, a byte that is not an escape's, stays raw in a
// canonical path's segment: a pchar other than ";" (unless allowed).
func literal(c byte, o PathOptions) bool {
	if unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', '=', ':', '@':
		return true
	case ';':
		return o.AllowSemicolons
	}
	return false
}

// unhex is the value of the hex digit c, if it is one.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// plain marks the bytes a canonical segment holds raw under any options:
// the pchars but ";" and "%".
var plain = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = literal(byte(c), PathOptions{})
	}
	return t
}()

// isCanonical reports whether CanonicalPath(p) is p: the scan of the common
// case, which allocates nothing. It is false for every path the slow path
// would change or refuse, and for a few it returns unchanged.
func isCanonical(p string, o PathOptions) bool {
	if p[0] != '/' {
		return false
	}
	start := 1 // of the current segment
	for i := 1; i < len(p); i++ {
		c := p[i]
		if plain[c] {
			if o.FoldCase && 'A' <= c && c <= 'Z' {
				return false
			}
			continue
		}
		switch c {
		case '/':
			if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
				return false
			}
			start = i + 1
		case ';':
			if !o.AllowSemicolons {
				return false
			}
		case '%':
			if i+2 >= len(p) {
				return false
			}
			h, ok1 := unhex(p[i+1])
			l, ok2 := unhex(p[i+2])
			if !ok1 || !ok2 || p[i+1] >= 'a' || p[i+2] >= 'a' {
				return false
			}
			b := h<<4 | l
			if b == 0 || unreserved(b) || b >= 0x80 && o.FoldCase {
				return false
			}
			switch b {
			case '/', '\\':
				if !o.KeepEncodedSlashes {
					return false
				}
			case ';':
				if !o.AllowSemicolons {
					return false
				}
			}
			i += 2
		default:
			return false
		}
	}
	return lastSegmentCanonical(p, start, o)
}

// lastSegmentCanonical reports whether p's last segment, from start, is
// canonical: not a dot segment, and empty (a trailing slash) only where
// the options keep one.
func lastSegmentCanonical(p string, start int, o PathOptions) bool {
	switch p[start:] {
	case "":
		return !o.TrimTrailingSlash || len(p) == 1
	case ".", "..":
		return false
	}
	return true
}

// decodedCanonical reports whether the escaping url.URL.EscapedPath gives
// a decoded path p (one with no RawPath) is canonical, without building it:
// EscapedPath allocates for any byte it escapes. False is always safe.
func decodedCanonical(p string, o PathOptions) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	start := 1
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case plain[c]:
			if o.FoldCase && 'A' <= c && c <= 'Z' {
				return false
			}
		case c == '/':
			if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
				return false
			}
			start = i + 1
		case c == ';':
			if !o.AllowSemicolons {
				return false
			}
		// Every other byte is escaped, %XX with upper-case digits, which a
		// canonical path keeps but for these.
		case c == 0, c == '\\' && !o.KeepEncodedSlashes, c >= 0x80 && o.FoldCase:
			return false
		}
	}
	return lastSegmentCanonical(p, start, o)
}

// canonicalize is CanonicalPath's slow path, for p that is not canonical.
func canonicalize(p string, o PathOptions) (string, error) {
	if p[0] != '/' {
		if p == "*" {
			return "", &PathError{p, `is "*" (the asterisk form), not a path`}
		}
		return "", &PathError{p, `does not start with "/"`}
	}
	// First each segment in its canonical spelling, then the segments that
	// stay: the escapes decide which segments are dot segments.
	var b strings.Builder
	b.Grow(len(p) + 8)
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteByte('/')
		case c == '%':
			if i+2 >= len(p) {
				return "", &PathError{p, "holds a malformed percent-escape at byte " + strconv.Itoa(i) + ` ("%" needs two hex digits)`}
			}
			h, ok1 := unhex(p[i+1])
			l, ok2 := unhex(p[i+2])
			if !ok1 || !ok2 {
				return "", &PathError{p, "holds a malformed percent-escape at byte " + strconv.Itoa(i) + ` ("%" needs two hex digits)`}
			}
			d := h<<4 | l
			if err := refused(p, d, true, o); err != nil {
				return "", err
			}
			if unreserved(d) {
				b.WriteByte(d)
			} else {
				writeEscaped(&b, d)
			}
			i += 2
		default:
			if err := refused(p, c, false, o); err != nil {
				return "", err
			}
			if literal(c, o) {
				b.WriteByte(c)
			} else {
				writeEscaped(&b, c)
			}
		}
	}
	segs := strings.Split(b.String()[1:], "/")
	out := make([]string, 0, len(segs))
	for _, s := range segs {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			if o.FoldCase {
				s = foldSegment(s)
			}
			out = append(out, s)
		}
	}
	// RFC 3986 keeps the slash before a last segment that is empty or a
	// dot segment: "/a/b/.." is "/a/".
	trailing := len(out) > 0 && !o.TrimTrailingSlash
	if last := segs[len(segs)-1]; last != "" && last != "." && last != ".." {
		trailing = false
	}
	res := "/" + strings.Join(out, "/")
	if trailing {
		res += "/"
	}
	return res, nil
}

// refused returns the error for byte c of p (decoded from an escape if
// escaped), or nil if it may be in a path.
func refused(p string, c byte, escaped bool, o PathOptions) error {
	switch {
	case c == 0:
		return &PathError{p, "holds a NUL byte (%00)"}
	case !escaped && (c < 0x20 || c == 0x7f):
		return &PathError{p, "holds a control character"}
	case c == '/' && escaped, c == '\\':
		if !o.KeepEncodedSlashes {
			return &PathError{p, `holds an encoded slash (%2F or %5C) or a backslash, which servers read differently`}
		}
	case c == ';':
		if !o.AllowSemicolons {
			return &PathError{p, `holds a ";" (or %3B), which some servers read as the start of path parameters`}
		}
	}
	return nil
}

// foldSegment folds the case of a canonical segment: raw ASCII letters,
// and the runes spelt as escaped UTF-8.
func foldSegment(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	var run []byte // decoded bytes of consecutive escapes above 0x7F
	flush := func() {
		for len(run) > 0 {
			r, n := utf8.DecodeRune(run)
			if r == utf8.RuneError && n <= 1 {
				n = 1
				writeEscaped(&b, run[0])
			} else {
				f := foldRune(r)
				var enc [utf8.UTFMax]byte
				for _, c := range enc[:utf8.EncodeRune(enc[:], f)] {
					if c < 0x80 {
						b.WriteByte(c) // a letter: unreserved
					} else {
						writeEscaped(&b, c)
					}
				}
			}
			run = run[n:]
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			h, _ := unhex(s[i+1])
			l, _ := unhex(s[i+2])
			if d := h<<4 | l; d >= 0x80 {
				run = append(run, d)
				i += 2
				continue
			}
			flush()
			b.WriteString(s[i : i+3])
			i += 2
			continue
		}
		flush()
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	flush()
	return b.String()
}

// writeEscaped writes c's escape, with upper-case hex digits.
func writeEscaped(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&15])
}

// foldRune is r's case folded: the lower case of the least rune that folds
// with it, so that every rune of a simple-folding orbit gives the same.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

// decodePath fully decodes a canonical path: the path as rules see it.
// Every '%' of a canonical path starts a valid escape.
func decodePath(p string) string {
	n := strings.Count(p, "%")
	if n == 0 {
		return p
	}
	b := make([]byte, 0, len(p)-2*n)
	for i := 0; i < len(p); i++ {
		if p[i] == '%' {
			h, _ := unhex(p[i+1])
			l, _ := unhex(p[i+2])
			b = append(b, h<<4|l)
			i += 2
			continue
		}
		b = append(b, p[i])
	}
	return string(b)
}

// InvalidPaths counts the requests refused since New because their path
// has no canonical form (ReasonInvalidPath), by Check, Handler and the
// check API alike.
func (l *Middleware) InvalidPaths() uint64 { return l.opts.invalidPaths.Load() }

// validatePaths reports the match values of path and path_prefix that no
// request can have: requests are matched in canonical form, so a value
// that is not one (a "//", a dot segment, an upper-case letter under
// FoldCase) would switch its rule off without a word.
func validatePaths(rules []Rule, o PathOptions, p *problems) {
	for i := range rules {
		r := &rules[i]
		for _, k := range []string{"path", "path_prefix"} {
			for _, v := range r.Match[k] {
				if !strings.HasPrefix(v, "/") {
					continue // reported by validateMatch
				}
				raw, opts := escapeRuleValue(v, o), o
				if k == "path_prefix" {
					// What follows the prefix completes its last segment.
					raw, opts.TrimTrailingSlash = raw+"x", false
				}
				c, err := CanonicalPath(raw, opts)
				switch {
				case err != nil:
					p.add(r.Name, i, "match."+k, "no request path can match %s: requests are matched in canonical form, and a path that %s is refused", quote(v), err.(*PathError).Problem)
				case decodePath(c) != v && k == "path":
					p.add(r.Name, i, "match."+k, "no request path can match %s: requests are matched in canonical form, which for this one is %s", quote(v), quote(decodePath(c)))
				case decodePath(c) != v+"x" && k == "path_prefix":
					p.add(r.Name, i, "match."+k, "no request path can start with %s: requests are matched in canonical form (no empty or dot segment, no escape of a letter or digit, and the case and slash options of the limiter)", quote(v))
				}
			}
		}
	}
}

// escapeRuleValue is the raw spelling of a decoded path: the bytes a
// canonical path holds raw stay raw, the others are escaped.
func escapeRuleValue(v string, o PathOptions) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '/' || literal(c, o) {
			b.WriteByte(c)
		} else {
			writeEscaped(&b, c)
		}
	}
	return b.String()
}
