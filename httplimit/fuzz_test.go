package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// parseCost accepts exactly the plain decimals, with the value
// strconv.ParseFloat gives them (MaxFloat64 beyond float64's range).
func FuzzParseCost(f *testing.F) {
	for _, s := range []string{"0", "5", "0.5", "-1", "+5", "1e3", "0x10", " 5", "5.", ".5", "NaN", "Inf", "1_000", "99999999999999999999", "1.2.3", ""} {
		f.Add(s)
	}
	plain := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseCost(s)
		if ok != plain.MatchString(s) {
			t.Fatalf("parseCost(%q) ok = %v, want %v", s, ok, !ok)
		}
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			want = math.MaxFloat64
		}
		if got != want || got < 0 {
			t.Fatalf("parseCost(%q) = %v, want %v", s, got, want)
		}
	})
}

// rejectAll stands for a configured JWT verifier, which rules that read
// claims need and ParseRules cannot know about.
type rejectAll struct{}

func (rejectAll) VerifyJWT(string) (Claims, error) { return nil, ErrJWTSignature }

// Whatever the document, ParseRules never panics; it returns rules that New
// accepts (given a JWT verifier), or a *ConfigError whose every problem says
// something.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(`{"rules":[{"name":"a","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":2}}]}`))
	f.Add([]byte(`{"rules":[{"name":"a","limit_keys":["header:x"],"algorithm_config":{"rps":1,"burst":2},"match":{"jwt:p":["x","y"]}},{"name":"b","limit_keys":["header:x"],"algorithm_config":{"tokens_per_second":1,"burst":2,"cost_source":"query:w"}}]}`))
	f.Add([]byte(`{"rules":[{"name":"a","limit_keys":["jwt:org"],"algorithm_config":{"rps":1,"burst":2},"insecure_unverified_jwt":true}]}`))
	f.Add([]byte(`{"rules":[{"name":"a","name":"b"}]}`))
	f.Add([]byte(`[[[[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseRules(data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not a ConfigError with problems", err)
			}
			for _, p := range ce.Problems {
				if p.Problem == "" {
					t.Fatalf("empty problem in %v", err)
				}
			}
			return
		}
		l, err := New(rules, Options{Store: NewMemoryStore(MemoryOptions{SweepInterval: -1}), JWT: rejectAll{}})
		if err != nil {
			t.Fatalf("ParseRules accepted rules New rejects: %v", err)
		}
		l.Close()
	})
}

// jsonTextFault against an exact model: s is written as a JSON string, each
// rune raw or as a \u escape (pairs above U+FFFF) as escape's bits say, and
// lone surrogates are spliced in where lone's bits say. The document is
// faultless exactly when s is UTF-8 and nothing was spliced, and then it
// decodes to s byte for byte: no key is ever merged with another.
func FuzzJSONTextFault(f *testing.F) {
	f.Add("plain", uint64(0), uint8(0))
	f.Add("\xff", uint64(0), uint8(0))
	f.Add("é😀\"\\", uint64(0xff), uint8(0))
	f.Add("ab", uint64(1), uint8(2))
	f.Fuzz(func(t *testing.T, s string, escape uint64, lone uint8) {
		doc := []byte{'"'}
		spliced := false
		for i, r := range []rune(s) {
			if lone>>(i%8)&1 == 1 && i < 8 {
				half := 0xD800 + i*0x100 // high for i < 4, low from 4
				doc = fmt.Appendf(doc, `\u%04x`, half)
				spliced = true
			}
			switch {
			case r == utf8.RuneError:
				// []rune replaced an invalid byte, or s holds U+FFFD: write
				// it raw either way; only the first is a fault.
				doc = utf8.AppendRune(doc, r)
			case escape>>(i%64)&1 == 1 && r > 0xFFFF:
				hi, lo := utf16.EncodeRune(r)
				doc = fmt.Appendf(doc, `\u%04x\u%04X`, hi, lo)
			case escape>>(i%64)&1 == 1 || r < 0x20 || r == '"' || r == '\\':
				doc = fmt.Appendf(doc, `\u%04x`, r)
			default:
				doc = utf8.AppendRune(doc, r)
			}
		}
		doc = append(doc, '"')
		// The raw bytes of s, when it is not UTF-8: the fault must be found
		// in them, not hidden by []rune's replacement above.
		if !utf8.ValidString(s) {
			doc = append(append([]byte(`["`), s...), `"]`...)
		}
		fault := jsonTextFault(doc)
		if want := !utf8.ValidString(s) || spliced; (fault >= 0) != want {
			t.Fatalf("jsonTextFault(%q) = %d, want a fault: %v", doc, fault, want)
		}
		if fault >= 0 {
			return
		}
		var got string
		if err := json.Unmarshal(doc, &got); err != nil || got != s {
			t.Fatalf("%q decodes to %q (%v), want %q", doc, got, err, s)
		}
	})
}
