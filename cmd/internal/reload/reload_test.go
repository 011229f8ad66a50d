package reload_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/reload"
)

// memSource is a source held in memory: its content, or the error reading
// it fails with. Parse fails on content starting with "bad".
type memSource struct {
	mu      sync.Mutex // Run reads on its goroutine while the test writes
	content string
	readErr error
	parses  int
}

func (m *memSource) Read(context.Context) (reload.Version[string], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readErr != nil {
		return reload.Version[string]{}, m.readErr
	}
	c := m.content
	return reload.Version[string]{Digest: sha256.Sum256([]byte(c)), Parse: func() (string, error) {
		m.parses++
		if strings.HasPrefix(c, "bad") {
			return "", fmt.Errorf("cannot parse %q", c)
		}
		return c, nil
	}}, nil
}

// recorder is a Handler that records what was applied and reported, and
// refuses to apply "refused".
type recorder struct {
	mu       sync.Mutex
	inForce  string
	events   []string
	applied  chan string
	reported chan string
}

func newRecorder() *recorder {
	return &recorder{applied: make(chan string, 16), reported: make(chan string, 16)}
}

func (r *recorder) handler() reload.Handler[string] {
	return reload.Handler[string]{
		Apply: func(s string) error {
			if s == "refused" {
				return errors.New("refused by the limiter")
			}
			r.mu.Lock()
			r.inForce = s
			r.mu.Unlock()
			return nil
		},
		Loaded: func(s string) { r.record("loaded " + s); r.applied <- s },
		Failed: func(st reload.Stage, err error) {
			e := fmt.Sprintf("failed %d: %v", st, err)
			r.record(e)
			r.reported <- e
		},
	}
}

func (r *recorder) record(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func (r *recorder) expect(t *testing.T, step string, want ...string) {
	t.Helper()
	got := r.take()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s: events %q, want %q", step, got, want)
	}
}

// A check parses only a change, reports each problem once, and keeps the
// configuration in force through every failure; a forced check parses,
// applies or reports whatever the source holds.
func TestCheckParsesOnlyChangesAndReportsOnce(t *testing.T) {
	ctx := context.Background()
	src := &memSource{content: "v1"}
	first, d, err := reload.First[string](ctx, src)
	if err != nil || first != "v1" || src.parses != 1 {
		t.Fatalf("First = %q, %v after %d parses; want v1 after 1", first, err, src.parses)
	}
	rec := newRecorder()
	rec.inForce = first
	r := reload.New[string](src, d, rec.handler())

	r.Check(ctx, false)
	rec.expect(t, "unchanged")
	if src.parses != 1 {
		t.Errorf("an unchanged source was parsed again (%d parses)", src.parses)
	}

	src.content = "v2"
	r.Check(ctx, false)
	r.Check(ctx, false)
	rec.expect(t, "changed", "loaded v2")

	src.readErr = os.ErrNotExist
	r.Check(ctx, false)
	r.Check(ctx, false)
	rec.expect(t, "unreadable, twice", "failed 0: file does not exist")
	src.readErr = os.ErrPermission
	r.Check(ctx, false)
	rec.expect(t, "another read error", "failed 0: permission denied")
	r.Check(ctx, true)
	rec.expect(t, "forced, unreadable", "failed 0: permission denied")
	src.readErr = nil
	r.Check(ctx, false)
	rec.expect(t, "readable again, unchanged")

	src.content = "bad v3"
	r.Check(ctx, false)
	r.Check(ctx, false)
	rec.expect(t, "does not parse, twice", `failed 1: cannot parse "bad v3"`)
	r.Check(ctx, true)
	rec.expect(t, "forced, does not parse", `failed 1: cannot parse "bad v3"`)

	src.content = "refused"
	r.Check(ctx, false)
	r.Check(ctx, false)
	rec.expect(t, "refused, twice", "failed 2: refused by the limiter")

	if rec.inForce != "v2" {
		t.Errorf("in force after the failures: %q, want v2", rec.inForce)
	}
	src.content = "v2"
	r.Check(ctx, false)
	rec.expect(t, "back to v2", "loaded v2")
	parses := src.parses
	r.Check(ctx, true)
	rec.expect(t, "forced, unchanged", "loaded v2")
	if src.parses != parses+1 {
		t.Errorf("a forced check parsed %d times, want once", src.parses-parses)
	}
}

func TestFirstNamesTheStage(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		src   *memSource
		stage reload.Stage
	}{
		{&memSource{readErr: os.ErrNotExist}, reload.Read},
		{&memSource{content: "bad"}, reload.Parse},
	} {
		_, _, err := reload.First[string](ctx, tt.src)
		var re *reload.Error
		if !errors.As(err, &re) || re.Stage != tt.stage {
			t.Errorf("First of %+v: %v, want an *Error at stage %d", tt.src, err, tt.stage)
		}
	}
}

// Run checks on every tick of the channel it is given, and stops when its
// context ends.
func TestRunChecksOnEveryTick(t *testing.T) {
	src := &memSource{content: "v1"}
	_, d, _ := reload.First[string](context.Background(), src)
	rec := newRecorder()
	r := reload.New[string](src, d, rec.handler())
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() { r.Run(ctx, tick); close(done) }()

	tick <- time.Time{} // unchanged: nothing
	r.Check(ctx, true)  // a SIGHUP meanwhile, serialised with the ticks
	if got := <-rec.applied; got != "v1" {
		t.Errorf("forced check applied %q, want v1", got)
	}
	src.mu.Lock()
	src.content = "v2"
	src.mu.Unlock()
	tick <- time.Time{}
	if got := <-rec.applied; got != "v2" {
		t.Errorf("tick after a change applied %q, want v2", got)
	}
	cancel()
	<-done
	rec.expect(t, "run", "loaded v1", "loaded v2")
}

// feed is a watched source driven by the test.
type feed struct {
	readings chan func(deliver func(string, error))
	refresh  chan struct{}
}

func (f *feed) Watch(ctx context.Context, deliver func(string, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-f.readings:
			r(deliver)
		}
	}
}

func (f *feed) Refresh() { f.refresh <- struct{}{} }

// A watched source's readings are applied or reported as they come, and a
// forced check asks it to read again.
func TestWatchedSourceDeliveries(t *testing.T) {
	f := &feed{readings: make(chan func(func(string, error))), refresh: make(chan struct{}, 1)}
	rec := newRecorder()
	r := reload.NewWatched[string](f, rec.handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, nil); close(done) }()

	f.readings <- func(d func(string, error)) { d("v2", nil) }
	<-rec.applied
	f.readings <- func(d func(string, error)) { d("", errors.New("table missing")) }
	<-rec.reported
	f.readings <- func(d func(string, error)) { d("refused", nil) }
	<-rec.reported
	r.Check(ctx, false)
	select {
	case <-f.refresh:
		t.Error("an unforced check asked a watched source to read again")
	default:
	}
	r.Check(ctx, true)
	select {
	case <-f.refresh:
	default:
		t.Error("a forced check did not ask the watched source to read again")
	}
	cancel()
	<-done
	rec.expect(t, "deliveries", "loaded v2", "failed 0: table missing", "failed 2: refused by the limiter")
}

// A directory's digest covers the names and contents of its matching
// files: a change to either is a change, other files are not read.
func TestDirSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := reload.DirSource[string]{Dir: dir, Pattern: "*.yaml", Limit: 16, Parse: func(names []string, data [][]byte) (string, error) {
		var b strings.Builder
		for i, n := range names {
			fmt.Fprintf(&b, "%s=%s;", filepath.Base(n), data[i])
		}
		return b.String(), nil
	}}
	digest := func() reload.Digest {
		t.Helper()
		v, err := src.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return v.Digest
	}
	write("b.yaml", "2")
	write("a.yaml", "1")
	write("notes.txt", "x")
	got, d0, err := reload.First[string](context.Background(), src)
	if err != nil || got != "a.yaml=1;b.yaml=2;" {
		t.Fatalf("First = %q, %v; want both files in name order", got, err)
	}
	write("notes.txt", "y")
	if digest() != d0 {
		t.Error("a file outside the pattern changed the digest")
	}
	os.Rename(filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.yaml"))
	d1 := digest()
	if d1 == d0 {
		t.Error("a renamed file left the digest as it was")
	}
	write("c.yaml", "3")
	if digest() == d1 {
		t.Error("a changed file left the digest as it was")
	}
	write("a.yaml", strings.Repeat("x", 17))
	if _, err := src.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "larger than 16 bytes") {
		t.Errorf("a file over the limit: %v, want an error naming the limit", err)
	}
	if _, err := (reload.DirSource[string]{Dir: filepath.Join(dir, "none"), Pattern: "*"}).Read(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing directory: %v, want ErrNotExist", err)
	}
}
