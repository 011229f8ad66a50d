package pgaudit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUserID(t *testing.T) {
	for s, want := range map[string]any{"42": int64(42), "-7": int64(-7), "9223372036854775807": int64(9223372036854775807),
		"042": nil, "+42": nil, "9223372036854775808": nil, "ann": nil, "": nil, "4 2": nil} {
		id, ok := userID(s)
		var got any
		if ok {
			got = id
		}
		if got != want {
			t.Errorf("userID(%q) = %v, want %v", s, got, want)
		}
	}
}

// fit cuts at character boundaries, keeps values apart by their hash, and
// makes any bytes storable.
func TestFit(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes, 300 characters
	a, b := fit(long+"a", 256), fit(long+"b", 256)
	if n := utf8.RuneCountInString(a); n != 256 || !utf8.ValidString(a) {
		t.Errorf("fit of 301 characters: %d characters, valid %v", n, utf8.ValidString(a))
	}
	if a == b || a[:len(a)-16] != b[:len(b)-16] || !strings.Contains(a, "…") {
		t.Errorf("two long keys with one prefix: %q and %q", a, b)
	}
	if s := strings.Repeat("x", 256); fit(s, 256) != s {
		t.Error("a value of exactly 256 characters was changed")
	}
	if got := fit("a\x00b\xffc", 10); got != "a\uFFFDb\uFFFDc" {
		t.Errorf("fit of NUL and invalid UTF-8: %q", got)
	}
}
