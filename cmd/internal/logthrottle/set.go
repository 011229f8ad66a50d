package logthrottle

import (
	"log"
	"log/slog"
	"sync"
	"time"
)

// Interval is the most often serve logs an error that repeats.
const Interval = 10 * time.Second

// Set hands out a throttled logger per class of errors (a store, an
// upstream, a listener) and flushes them all on shutdown.
type Set struct {
	base  slog.Handler
	every time.Duration

	mu sync.Mutex
	hs []*Handler // guarded by mu
}

// NewSet returns a Set whose loggers write to base, each at most a line
// per every.
func NewSet(base slog.Handler, every time.Duration) *Set {
	return &Set{base: base, every: every}
}

// Logger is a logger for one class of errors, which repeats at most once
// per interval; its records carry the class as "component".
func (s *Set) Logger(class string) *slog.Logger {
	h := NewHandler(s.base, s.every)
	s.mu.Lock()
	s.hs = append(s.hs, h)
	s.mu.Unlock()
	return slog.New(h).With("component", class)
}

// ErrorLog is a log.Logger for the standard library's servers and
// proxies, whose messages go through the throttled logger of class.
func (s *Set) ErrorLog(class string) *log.Logger {
	return slog.NewLogLogger(s.Logger(class).Handler(), slog.LevelWarn)
}

// Flush writes the lines held back by every logger of the set.
func (s *Set) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hs {
		h.Flush()
	}
}
