package httplimit

import "unicode/utf8"

// jsonTextFault returns the offset of the first thing in a JSON document that
// encoding/json would silently turn into U+FFFD: bytes that are not UTF-8, or
// a \u escape of half a surrogate pair. Decoded, such strings lose their
// bytes, and distinct keys would become one. It returns -1 when there is none;
// the document's syntax is left to the decoder.
func jsonTextFault(doc []byte) int {
	if !utf8.Valid(doc) {
		for i := 0; i < len(doc); {
			r, n := utf8.DecodeRune(doc[i:])
			if r == utf8.RuneError && n <= 1 {
				return i
			}
			i += n
		}
	}
	inString := false
	for i := 0; i < len(doc); i++ {
		switch {
		case doc[i] == '"':
			inString = !inString
			continue
		case doc[i] != '\\' || !inString:
			continue
		}
		// An escape: \" and \\ must not toggle or start anything.
		u, ok := escapedUnit(doc, i)
		switch {
		case !ok:
			i++
		case u < 0xD800 || u > 0xDFFF:
			i += 5
		case u >= 0xDC00:
			return i // a low surrogate without its high one
		default:
			lo, ok := escapedUnit(doc, i+6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return i // a high surrogate without its low one
			}
			i += 11
		}
	}
	return -1
}

// escapedUnit reads the \uXXXX escape at doc[i], if there is one.
func escapedUnit(doc []byte, i int) (rune, bool) {
	if i+6 > len(doc) || doc[i] != '\\' || doc[i+1] != 'u' {
		return 0, false
	}
	var u rune
	for _, c := range doc[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			u = u<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return u, true
}
