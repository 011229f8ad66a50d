package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A TakeAll is one statement on one table: Limiters of another table on the
// same pool are foreign, or one of their buckets would be kept twice.
func TestTakeAllOtherTableIsForeign(t *testing.T) {
	db := newDB(t, Schema{})
	if err := Install(context.Background(), db, Schema{Table: "other_buckets"}); err != nil {
		t.Fatal(err)
	}
	a := mustNew(t, db, Config{Limit: frozen, Burst: 1, Timeout: testTimeout})
	b := mustNew(t, db, Config{Limit: frozen, Burst: 1, Table: "other_buckets", Timeout: testTimeout})
	out := make([]engine.Decision, 2)
	if _, err := a.TakeAll(context.Background(), []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}}, out); !errors.Is(err, engine.ErrForeignTake) {
		t.Fatalf("TakeAll across tables: %v, want ErrForeignTake", err)
	}
	if v, err := b.Tokens(context.Background(), "k"); err != nil || v != 1 {
		t.Fatalf("b's bucket after the refused call: %v %v", v, err)
	}
}

// A TakeAll that only peeks writes and locks nothing: no rows appear.
func TestTakeAllPeeksWriteNothing(t *testing.T) {
	db := newDB(t, Schema{})
	l := mustNew(t, db, Config{Limit: 1, Burst: 5, Timeout: testTimeout})
	out := make([]engine.Decision, 2)
	k, err := l.TakeAll(context.Background(), []engine.Take{{Limiter: l, Key: "x", N: 0}, {Limiter: l, Key: "y", N: 0}}, out)
	if err != nil || k != -1 || out[0].Remaining != 5 || out[1].Remaining != 5 {
		t.Fatalf("peeks: %d %+v %v", k, out, err)
	}
	if rows, _ := tableStats(t, db, DefaultTable); rows != 0 {
		t.Fatalf("%d rows after a TakeAll of peeks, want none", rows)
	}
}

// Every take of a call counts once in its Limiter's Stats, as in the engine:
// allowed if the call was, denied otherwise.
func TestTakeAllStats(t *testing.T) {
	db := newDB(t, Schema{})
	a := mustNew(t, db, Config{Limit: frozen, Burst: 5, Timeout: testTimeout})
	b := mustNew(t, db, Config{Limit: frozen, Burst: 1, Timeout: testTimeout})
	out := make([]engine.Decision, 2)
	takes := []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}}
	for range 2 {
		if _, err := a.TakeAll(context.Background(), takes, out); err != nil {
			t.Fatal(err)
		}
	}
	if sa, sb := a.Stats(), b.Stats(); sa.Allowed != 1 || sa.Denied != 1 || sb.Allowed != 1 || sb.Denied != 1 {
		t.Fatalf("stats a %+v, b %+v: want one allowed and one denied each", sa, sb)
	}
}

// The functions need READ COMMITTED; a session with a stricter default gets
// a clear error that took nothing, not serialization failures under load.
func TestIsolationChecked(t *testing.T) {
	db := newDB(t, Schema{})
	cfg, err := pgxpool.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	strict, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	l := mustNew(t, strict, Config{Limit: 1, Burst: 5, Timeout: testTimeout})
	_, err = l.Take(context.Background(), "k", 1)
	if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "READ COMMITTED") {
		t.Fatalf("take under REPEATABLE READ: %v, want an error naming READ COMMITTED that took nothing", err)
	}
}
