package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// The rules file is read into a small tree first, rather than straight into
// structs, so that every problem can be reported at once with its path:
// encoding/json stops at the first unknown field and silently keeps the last
// of two equal keys.

// maxRulesBytes bounds a rules document; maxDepth its nesting.
const (
	maxRulesBytes = 1 << 20
	maxDepth      = 16
)

// jvalue is one JSON value. Objects keep their members in document order.
type jvalue struct {
	kind    jkind
	str     string      // jString
	num     json.Number // jNumber
	boolean bool        // jBool
	members []jmember   // jObject
	items   []*jvalue   // jArray
}

type jmember struct {
	name  string
	value *jvalue
}

type jkind int

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// parseJSON reads one JSON document. Duplicate keys are reported through dup,
// with the path of the object, and the first value is kept.
func parseJSON(data []byte, dup func(path, key string)) (*jvalue, error) {
	if len(data) > maxRulesBytes {
		return nil, fmt.Errorf("document is %d bytes, more than the limit of %d", len(data), maxRulesBytes)
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, errors.New("document starts with a byte order mark; save it as plain UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := readValue(d, "", 0, dup)
	if err != nil {
		return nil, at(data, d, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, at(data, d, errors.New("unexpected data after the top-level value"))
	}
	return v, nil
}

// at prefixes err with the line and column it was found at: the byte a
// syntax error names, or where the decoder stopped.
func at(data []byte, d *json.Decoder, err error) error {
	off := d.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset // the bytes before the offending one
	}
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

func readValue(d *json.Decoder, path string, depth int, dup func(path, key string)) (*jvalue, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d levels", orRoot(path), maxDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return nil, tokenErr(err)
	}
	switch t := tok.(type) {
	case nil:
		return &jvalue{kind: jNull}, nil
	case bool:
		return &jvalue{kind: jBool, boolean: t}, nil
	case json.Number:
		return &jvalue{kind: jNumber, num: t}, nil
	case string:
		return &jvalue{kind: jString, str: t}, nil
	case json.Delim:
		if t == '[' {
			v := &jvalue{kind: jArray}
			for d.More() {
				item, err := readValue(d, fmt.Sprintf("%s[%d]", path, len(v.items)), depth+1, dup)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			if _, err := d.Token(); err != nil { // ']'
				return nil, tokenErr(err)
			}
			return v, nil
		}
		v := &jvalue{kind: jObject}
		seen := map[string]bool{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, tokenErr(err)
			}
			key := kt.(string)
			item, err := readValue(d, join(path, key), depth+1, dup)
			if err != nil {
				return nil, err
			}
			if seen[key] {
				dup(path, key)
				continue
			}
			seen[key] = true
			v.members = append(v.members, jmember{key, item})
		}
		if _, err := d.Token(); err != nil { // '}'
			return nil, tokenErr(err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("invalid JSON token %v", tok)
}

func tokenErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errors.New("document is empty or truncated")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "document"
	}
	return path
}
