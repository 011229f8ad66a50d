package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer that a log handler and a throttle's timer may
// write while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Line is the part of a JSON log line the tests read.
type Line struct {
	Msg        string `json:"msg"`
	Err        string `json:"err"`
	Suppressed int64  `json:"suppressed"`
}

// Lines parses s as JSON log lines, one per line; a line that is not JSON
// fails the test.
func Lines(t testing.TB, s string) []Line {
	t.Helper()
	var out []Line
	for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var ll Line
		if err := json.Unmarshal([]byte(l), &ll); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, ll)
	}
	return out
}

// Grep is the lines of s that contain sub.
func Grep(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
