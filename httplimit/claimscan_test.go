package httplimit

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Wherever simpleClaims accepts a payload, it decodes, and scanClaim finds
// every claim as the decoder does (claimString of the decoded claims), or
// says that only the decoder can write it.
func FuzzScanClaim(f *testing.F) {
	for _, s := range []string{
		`{"sub":"ann"}`, `{}`, ` { } `, `{"sub":null}`, `{"sub":"a","sub":"b"}`, `{"sub":"a","sub":null}`, `{"sub":null,"sub":7}`,
		`{"sub":-1.5e+300}`, `{"sub":123456789012345678901234567890}`, `{"sub":true,"x":false}`, `{"sub":0}`,
		`{"x":{"sub":"inner"},"sub":"outer"}`, `{"sub":{"b":[true,"x<y"],"a":1}}`, `{"sub":["}",{"]":","}]}`,
		`{"a b":"c","":"empty name","sub":"é😀"}`, "\t{\n\"sub\" :\r\"spaced\" ,\"n\":[ 1 , 2 ] }\n",
		`{"sub":"a\"b"}`, `{"s\u0075b":"escaped name"}`, `{"sub":"\ud800"}`, "{\"sub\":\"\xff\"}", `{"sub":"a"} x`, `[{"sub":"a"}]`, `null`, ``,
	} {
		f.Add([]byte(s), "sub")
	}
	f.Add([]byte(`{"a b":"c","":"empty name"}`), "")
	f.Add([]byte(`{"a b":"c"}`), "a b")
	f.Fuzz(func(t *testing.T, payload []byte, name string) {
		if !simpleClaims(payload) {
			return
		}
		c, err := decodeClaims(payload)
		if err != nil {
			t.Fatalf("simpleClaims accepts %q, which does not decode: %v", payload, err)
		}
		want, wantOK := claimString(c, name)
		v, found, nested := scanClaim(payload, name)
		if nested {
			switch c[name].(type) {
			case map[string]any, []any:
			default:
				t.Fatalf("claim %q of %q: scanClaim says nested, the decoder gives %#v", name, payload, c[name])
			}
			return
		}
		if string(v) != want || found != wantOK {
			t.Fatalf("claim %q of %q: scanClaim gives %q, %v; the decoder %q, %v", name, payload, v, found, want, wantOK)
		}
	})
}

// scanClaim against the decoder on random objects: nested values holding
// the characters that delimit members, duplicate names, every kind of
// value, whitespace anywhere.
func TestScanClaimRandomObjects(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	names := []string{"sub", "a", "", "x y", "sub "}
	strs := []string{`""`, `"ann"`, `"}"`, `"]"`, `","`, `":"`, `"{\"a\":1}"`, `"é😀"`, `"null"`}
	nums := []string{"0", "-0", "42", "-1.5", "1e9", "2E-3", "123456789012345678901234567890", "0.10"}
	space := func() string { return []string{"", " ", "\t", "\n ", "\r\n"}[rnd.IntN(5)] }
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rnd.IntN(7); {
		case k == 0:
			return strs[rnd.IntN(len(strs))]
		case k == 1:
			return nums[rnd.IntN(len(nums))]
		case k == 2:
			return []string{"true", "false", "null"}[rnd.IntN(3)]
		case depth >= 3 || k == 3:
			return `"v"`
		case k == 4:
			var items []string
			for range rnd.IntN(3) {
				items = append(items, space()+value(depth+1)+space())
			}
			return "[" + strings.Join(items, ",") + "]"
		}
		return object(rnd, names, space, value, depth+1)
	}
	accepted := 0
	for range 20000 {
		payload := []byte(space() + object(rnd, names, space, value, 0) + space())
		if !simpleClaims(payload) {
			continue
		}
		accepted++
		c, err := decodeClaims(payload)
		if err != nil {
			t.Fatalf("simpleClaims accepts %q, which does not decode: %v", payload, err)
		}
		for _, name := range names {
			want, wantOK := claimString(c, name)
			v, found, nested := scanClaim(payload, name)
			if nested {
				if _, ok := c[name].(string); ok || !wantOK {
					t.Fatalf("claim %q of %s: scanClaim says nested, the decoder gives %#v", name, payload, c[name])
				}
				v, found = []byte(want), wantOK // the caller decodes
			}
			if string(v) != want || found != wantOK {
				t.Fatalf("claim %q of %s: scanClaim gives %q, %v; the decoder %q, %v", name, payload, v, found, want, wantOK)
			}
		}
	}
	if accepted < 10000 {
		t.Errorf("only %d of 20000 objects read in place", accepted)
	}
}

func object(rnd *rand.Rand, names []string, space func() string, value func(int) string, depth int) string {
	var members []string
	for range rnd.IntN(5) {
		members = append(members, space()+strconv.Quote(names[rnd.IntN(len(names))])+space()+":"+space()+value(depth)+space())
	}
	return "{" + strings.Join(members, ",") + "}"
}
