package pgaudit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options configures a Writer; the zero value of each field picks its
// default.
type Options struct {
	// Table is the table written to, created by Install; "" is DefaultTable.
	Table string
	// QueueSize is the most denials waiting to be written (default 10,000:
	// half a second at 20,000 denials a second, about 1.7 MB). A denial that
	// finds the queue full is dropped and counted.
	QueueSize int
	// MaxBatch is the most rows one COPY writes (default 1,000).
	MaxBatch int
	// FlushInterval is the longest a denial waits for others to share its
	// COPY (default 200 ms): a batch is written when full or when its first
	// denial is this old.
	FlushInterval time.Duration
	// BatchTimeout bounds one COPY (default 5 s); one that outlives it fails
	// and is retried.
	BatchTimeout time.Duration
	// MaxBackoff is the longest wait between retries of a failed COPY
	// (default 5 s); the first retry waits 50 ms, each next one twice the last.
	MaxBackoff time.Duration
	// RuleID, if set, gives the rule_id of a rule's name (from a rules table,
	// say: pgrules.RuleIDOf). It is asked first for the name of the limit
	// that denied, for a rule with several, then for the rule's; without
	// it, or when it reports false, rule_id is NULL. It is called by the
	// Writer's goroutine, never on the request path.
	RuleID func(rule string) (int64, bool)
	// OnError, if set, is called with every failed COPY, from the Writer's
	// goroutine.
	OnError func(error)
}

func (o Options) withDefaults() Options {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 10_000
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1_000
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 200 * time.Millisecond
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	return o
}

// firstBackoff is the wait before the first retry of a failed COPY.
const firstBackoff = 50 * time.Millisecond

// CopyFromer is what a Writer writes with: a *pgxpool.Pool or a *pgx.Conn
// (which only one goroutine may use: give the Writer its own).
type CopyFromer interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

// Writer writes denials to a table in batches, from a bounded queue, on a
// goroutine of its own. Its methods are safe for concurrent use.
type Writer struct {
	db    CopyFromer
	o     Options
	table pgx.Identifier
	queue chan httplimit.Denial

	// Counters: recorded and dropped are the request path's, the others the
	// goroutine's. pending is the denials queued and not yet written,
	// rejected or abandoned: Deny adds one before the queue has it, the
	// goroutine takes it away only once the row's fate is known, so no
	// moment of the hand-over shows a denial as gone.
	recorded, dropped                           atomic.Uint64
	written, rejected, abandoned, batches, fail atomic.Uint64
	pending                                     atomic.Int64

	closed    atomic.Bool   // Deny drops from now on
	stop      chan struct{} // closed by Close: write what is queued, then end
	done      chan struct{} // closed when the goroutine ends
	ctx       context.Context
	cancel    context.CancelFunc // Close's deadline passed: give up
	closeOnce sync.Once
}

// NewWriter starts a Writer of denials to the table of o (created by
// Install) through db, which it does not close.
func NewWriter(db CopyFromer, o Options) (*Writer, error) {
	o = o.withDefaults()
	if err := checkTable(o.Table); err != nil {
		return nil, err
	}
	w := &Writer{db: db, o: o, table: pgx.Identifier{o.Table}, queue: make(chan httplimit.Denial, o.QueueSize),
		stop: make(chan struct{}), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// Deny queues d to be written, or drops it if the queue is full or the
// Writer closed. It never blocks and does not allocate: it is meant as
// httplimit.Options.OnDeny.
func (w *Writer) Deny(d httplimit.Denial) {
	w.recorded.Add(1)
	if w.closed.Load() {
		w.dropped.Add(1)
		return
	}
	w.pending.Add(1)
	select {
	case w.queue <- d:
	default:
		w.dropped.Add(1)
		w.pending.Add(-1)
	}
}

// Stats are a Writer's counts since it started.
type Stats struct {
	// Recorded counts calls of Deny.
	Recorded uint64
	// Written counts rows written.
	Written uint64
	// Dropped counts denials not queued: the queue was full, or the Writer
	// closed.
	Dropped uint64
	// Rejected counts rows the database refused for their content.
	Rejected uint64
	// Abandoned counts rows still queued when Close's context ended.
	Abandoned uint64
	// Batches counts COPYs that succeeded, FailedBatches those that failed
	// (each retry of one batch is one more).
	Batches, FailedBatches uint64
	// Queued is the denials waiting: in the queue, and taken from it but not
	// yet written. It may count, for an instant, a denial that Deny is
	// about to drop, never too few.
	Queued int
}

// Stats returns the Writer's counts. The counters are read one by one, so
// that they add up (see the package documentation) only when no denial
// comes and no batch is being written. Queued is read first: a row's
// Written (or Rejected, or Abandoned) is counted before it leaves Queued, so
// Stats that show Queued 0 show every row queued before as written,
// rejected or abandoned.
func (w *Writer) Stats() Stats {
	queued := int(w.pending.Load())
	return Stats{Recorded: w.recorded.Load(), Written: w.written.Load(), Dropped: w.dropped.Load(),
		Rejected: w.rejected.Load(), Abandoned: w.abandoned.Load(), Batches: w.batches.Load(),
		FailedBatches: w.fail.Load(), Queued: queued}
}

// Close stops taking denials, writes those queued (retrying as usual) until
// ctx ends, and returns an error saying how many were abandoned, if any. It
// does not close the database. Later calls wait for the first to finish.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		stopAfter := context.AfterFunc(ctx, w.cancel)
		close(w.stop)
		<-w.done
		stopAfter()
		w.cancel()
	})
	<-w.done
	if n := w.abandoned.Load(); n > 0 {
		return fmt.Errorf("pgaudit: Close: %d denials not written before the deadline", n)
	}
	return nil
}

// run drains the queue in batches until Close.
func (w *Writer) run() {
	defer close(w.done)
	batch := make([]httplimit.Denial, 0, w.o.MaxBatch)
	timer := time.NewTimer(w.o.FlushInterval)
	timer.Stop()
	for {
		batch = batch[:0]
		select {
		case d := <-w.queue:
			batch = append(batch, d)
		case <-w.stop:
			w.drain(batch)
			return
		}
		timer.Reset(w.o.FlushInterval)
		wait := true
		for wait && len(batch) < w.o.MaxBatch {
			select {
			case d := <-w.queue:
				batch = append(batch, d)
			case <-timer.C:
				wait = false
			case <-w.stop:
				wait = false
			}
		}
		timer.Stop()
		// Whatever is queued already joins the batch: Close then writes
		// full batches, not whatever a race between stop and the queue
		// left.
		batch = w.take(batch)
		w.write(batch)
	}
}

// take adds to batch what the queue holds, without waiting, up to
// MaxBatch.
func (w *Writer) take(batch []httplimit.Denial) []httplimit.Denial {
	for len(batch) < w.o.MaxBatch {
		select {
		case d := <-w.queue:
			batch = append(batch, d)
		default:
			return batch
		}
	}
	return batch
}

// drain writes what the queue holds, after Close, until it is empty or
// Close's deadline passes; what is left then is abandoned.
func (w *Writer) drain(batch []httplimit.Denial) {
	for {
		batch = w.take(batch[:0])
		if len(batch) == 0 {
			return
		}
		w.write(batch)
		if w.ctx.Err() != nil {
			n := len(w.queue)
			for range n {
				<-w.queue
			}
			w.abandoned.Add(uint64(n))
			w.pending.Add(-int64(n))
			return
		}
	}
}

// write writes batch, retrying while the database is unreachable, until
// it succeeds, the database refuses rows, or Close's deadline passes.
func (w *Writer) write(batch []httplimit.Denial) {
	wait := firstBackoff
	for {
		err := w.copy(batch)
		if err == nil {
			w.batches.Add(1)
			w.written.Add(uint64(len(batch)))
			w.pending.Add(-int64(len(batch)))
			return
		}
		w.fail.Add(1)
		if w.o.OnError != nil {
			w.o.OnError(err)
		}
		if refused(err) {
			w.bisect(batch)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
		}
		if w.ctx.Err() != nil {
			w.abandoned.Add(uint64(len(batch)))
			w.pending.Add(-int64(len(batch)))
			return
		}
		wait = min(2*wait, w.o.MaxBackoff)
	}
}

// bisect writes a batch the database refused in halves, so that only the
// rows it refuses alone are lost.
func (w *Writer) bisect(batch []httplimit.Denial) {
	if len(batch) == 1 {
		w.rejected.Add(1)
		w.pending.Add(-1)
		return
	}
	h := len(batch) / 2
	w.write(batch[:h])
	w.write(batch[h:])
}

// refused reports whether err is the database refusing the rows
// themselves (SQLSTATE class 22, data exception, or 23, integrity
// constraint violation), which no retry mends.
func refused(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	class := pe.Code[:2]
	return class == "22" || class == "23"
}

// copy writes batch with one COPY.
func (w *Writer) copy(batch []httplimit.Denial) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.o.BatchTimeout)
	defer cancel()
	src := &rows{batch: batch, ruleID: w.o.RuleID, i: -1, vals: make([]any, len(columns))}
	n, err := w.db.CopyFrom(ctx, w.table, columns, src)
	if err == nil && n != int64(len(batch)) {
		err = fmt.Errorf("pgaudit: COPY wrote %d rows of %d", n, len(batch))
	}
	return err
}

// rows is a batch as a pgx.CopyFromSource.
type rows struct {
	batch  []httplimit.Denial
	ruleID func(string) (int64, bool)
	i      int
	vals   []any // reused: pgx encodes each row before asking for the next
}

func (r *rows) Next() bool { r.i++; return r.i < len(r.batch) }

func (r *rows) Values() ([]any, error) {
	row(&r.batch[r.i], r.ruleID, r.vals)
	return r.vals, nil
}

func (r *rows) Err() error { return nil }
