package httplimit

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The unverified claims of a token are read from its payload in place
// rather than decoded into a map, when the payload's every string (name or
// value) is its bytes between its quotes: no escape, and UTF-8 (encoding/json
// turns invalid bytes into U+FFFD). Any other payload is decoded, as
// before.

// simpleClaims reports whether payload is a JSON object that scanClaim
// reads as encoding/json decodes it: valid JSON, valid UTF-8, and without a
// backslash.
func simpleClaims(payload []byte) bool {
	i := skipSpace(payload, 0)
	return i < len(payload) && payload[i] == '{' && bytes.IndexByte(payload, '\\') < 0 &&
		utf8.Valid(payload) && json.Valid(payload)
}

// scanClaim returns the claim name of payload, an object simpleClaims
// accepted, as claimString gives it: a string's bytes, a number's text as
// json.Number keeps it, true or false. As in encoding/json, the last member
// of that name counts. found is false when the claim is absent or null;
// nested reports an object or an array, whose compact text with sorted
// keys only a decoder gives.
func scanClaim(payload []byte, name string) (v []byte, found, nested bool) {
	i := skipSpace(payload, skipSpace(payload, 0)+1) // past '{'
	for payload[i] != '}' {
		end := i + 1 + bytes.IndexByte(payload[i+1:], '"')
		key := payload[i+1 : end]
		i = skipSpace(payload, skipSpace(payload, end+1)+1) // past ':'
		j := skipValue(payload, i)
		if string(key) == name {
			v, found = payload[i:j], true
		}
		if i = skipSpace(payload, j); payload[i] == ',' {
			i = skipSpace(payload, i+1)
		}
	}
	switch {
	case !found || v[0] == 'n':
		return nil, false, false
	case v[0] == '"':
		return v[1 : len(v)-1], true, false
	case v[0] == '{' || v[0] == '[':
		return nil, false, true
	}
	return v, true, false
}

// skipValue returns the end of the valid JSON value at p[i], whose strings
// have no escapes.
func skipValue(p []byte, i int) int {
	switch p[i] {
	case '"':
		return i + 2 + bytes.IndexByte(p[i+1:], '"')
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch p[i] {
			case '"':
				i += 1 + bytes.IndexByte(p[i+1:], '"')
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(p) {
		switch p[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipSpace returns the index of the first byte of p from i on that is not
// JSON whitespace.
func skipSpace(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}
