package engine_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/engine"
)

func TestBoundedKey(t *testing.T) {
	max := strings.Repeat("m", engine.MaxKeyBytes)
	long := max + "x"
	sum := sha256.Sum256([]byte(long))
	for _, c := range []struct {
		name, key, want string
	}{
		{"empty", "", ""},
		{"short", "api-key-1", "api-key-1"},
		{"MaxKeyBytes", max, max},
		{"MaxKeyBytes+1", long, "\xff" + string(sum[:])},
	} {
		if got := engine.BoundedKey(c.key); got != c.want {
			t.Errorf("%s: BoundedKey(%d bytes) = %q, want %q", c.name, len(c.key), got, c.want)
		}
	}
	// A key that starts with the mark is digested whatever its length, so
	// that a short key can never spell another key's digest.
	for _, k := range []string{"\xff", "\xffabc", engine.BoundedKey(long)} {
		got := engine.BoundedKey(k)
		if len(got) != 1+sha256.Size || got == k {
			t.Errorf("BoundedKey(%q) = %q: a marked key must be digested", k, got)
		}
	}
	seen := map[string]string{}
	for _, k := range []string{"", "\xff", long, long + "y", max, "\xff" + string(sum[:])} {
		b := engine.BoundedKey(k)
		if prev, dup := seen[b]; dup {
			t.Errorf("BoundedKey(%q) = BoundedKey(%q)", k, prev)
		}
		seen[b] = k
	}
}
