package httplimit

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"testing"
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
