package reload

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Digest identifies what a source held: equal digests, equal contents.
type Digest [32]byte

// Version is one reading of a source: the digest of its content, and how
// to parse it, which is left to be done only if the content changed.
type Version[T any] struct {
	Digest Digest
	Parse  func() (T, error)
}

// Source is where a configuration of type T is kept.
type Source[T any] interface {
	// Read reads the source as it stands. An error means nothing could
	// be read, and is reported as a read error.
	Read(ctx context.Context) (Version[T], error)
}

// Watched is a source that notices its own changes.
type Watched[T any] interface {
	// Watch reads the source whenever it may have changed and calls
	// deliver with every reading that differs from the one before (a
	// configuration, or the error that kept it from being read), until
	// ctx is done.
	Watch(ctx context.Context, deliver func(T, error))
	// Refresh makes Watch read at once and deliver the reading even if
	// it did not change.
	Refresh()
}

// FileSource is a configuration in one file, parsed by Parse.
type FileSource[T any] struct {
	Path  string
	Parse func([]byte) (T, error)
}

// Read reads the file whole.
func (f FileSource[T]) Read(context.Context) (Version[T], error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return Version[T]{}, err
	}
	return Version[T]{Digest: sha256.Sum256(data), Parse: func() (T, error) { return f.Parse(data) }}, nil
}

// DirSource is a configuration in the files of a directory that match
// Pattern (such as *.yaml), each at most Limit bytes.
type DirSource[T any] struct {
	Dir     string
	Pattern string
	Limit   int64
	// Parse parses the files, given in name order.
	Parse func(names []string, data [][]byte) (T, error)
}

// Read reads every matching file of the directory, reporting every file it
// could not read. The digest covers the names of the files and their
// contents, so a file renamed is a change.
func (d DirSource[T]) Read(context.Context) (Version[T], error) {
	if _, err := os.Stat(d.Dir); err != nil {
		return Version[T]{}, err
	}
	names, err := filepath.Glob(filepath.Join(d.Dir, d.Pattern))
	if err != nil {
		return Version[T]{}, err
	}
	slices.Sort(names)
	h := sha256.New()
	var data [][]byte
	var errs []error
	for _, name := range names {
		b, err := readBounded(name, d.Limit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(b))
		h.Write(b)
		data = append(data, b)
	}
	if len(errs) > 0 {
		return Version[T]{}, errors.Join(errs...)
	}
	v := Version[T]{Parse: func() (T, error) { return d.Parse(names, data) }}
	copy(v.Digest[:], h.Sum(nil))
	return v, nil
}

// readBounded reads a file of at most limit bytes; a larger one is an
// error, not read whole.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}
