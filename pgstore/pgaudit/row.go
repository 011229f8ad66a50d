package pgaudit

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/faucetgo/faucet/httplimit"
)

// columns are the columns a row fills, in the order of row's values.
var columns = []string{"bucket_key", "user_id", "ip_address", "endpoint", "requested_at",
	"tokens_at_time", "rule_id", "rule_name", "shadow"}

// The seed design's column widths, in characters (VARCHAR(n) counts
// characters, not bytes).
const (
	keyChars      = 256
	endpointChars = 255
	ruleChars     = 64
)

// row fills vals with the column values of d.
func row(d *httplimit.Denial, ruleID func(string) (int64, bool), vals []any) {
	vals[0] = fit(d.Key, keyChars)
	vals[1] = nil
	if id, ok := userID(d.Identity); ok {
		vals[1] = id
	}
	vals[2] = nil
	if d.ClientIP.IsValid() {
		vals[2] = d.ClientIP.WithZone("")
	}
	ep := d.Path
	if d.Method != "" {
		ep = d.Method + " " + d.Path
	}
	vals[3] = fit(ep, endpointChars)
	at := d.Time
	if at.IsZero() {
		at = time.Now()
	}
	vals[4] = at
	vals[5] = d.Remaining
	// A rule with several limits denies by one of them: the row is the
	// limit's, as the RateLimit fields name it (a rules table keeps a row
	// per limit).
	name := cmp.Or(d.Limit, d.Rule)
	vals[6] = nil
	if ruleID != nil {
		if id, ok := ruleID(name); ok {
			vals[6] = id
		} else if id, ok := ruleID(d.Rule); ok && name != d.Rule {
			vals[6] = id
		}
	}
	vals[7] = fit(name, ruleChars)
	vals[8] = d.Shadow
}

// userID is an identity that is a decimal int64 written as strconv writes
// it: "042" or "+42" is another client than "42", so it is no user_id.
func userID(s string) (int64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// hashChars is what fit appends to a value it cuts: "…" and 16 hex digits.
const hashChars = 1 + 16

// fit makes s storable in a VARCHAR(n) of a UTF-8 database: valid UTF-8
// without NUL, and at most n characters. A longer s keeps its first
// n-hashChars characters, then "…" and 16 hex digits of the SHA-256 of the
// whole (sanitized) value.
func fit(s string, n int) string {
	s = clean(s)
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	cut, chars := 0, 0
	for i := range s {
		if chars == n-hashChars {
			cut = i
			break
		}
		chars++
	}
	return s[:cut] + "…" + hex.EncodeToString(sum[:8])
}

// clean replaces invalid UTF-8 and NUL bytes with U+FFFD: either would fail
// the whole COPY.
func clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
