package pgaudit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgaudit"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newPool connects to dsn until the test ends.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// installed is a pool on a new database of the shared server, with the
// audit table installed.
func installed(t testing.TB, s pgaudit.Schema) *pgxpool.Pool {
	t.Helper()
	pool := newPool(t, pgtest.Shared(t).NewDatabase(t))
	if err := pgaudit.Install(context.Background(), pool, s); err != nil {
		t.Fatal(err)
	}
	return pool
}

func count(t testing.TB, pool *pgxpool.Pool, query string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Every column gets what the package documentation says: NULLs where a
// value is unknown, IPv4 and IPv6 addresses whole, a numeric identity as
// user_id, long keys cut with their hash, bytes PostgreSQL cannot store
// replaced.
func TestColumns(t *testing.T) {
	pool := installed(t, pgaudit.Schema{})
	// Install is idempotent.
	if err := pgaudit.Install(context.Background(), pool, pgaudit.Schema{}); err != nil {
		t.Fatalf("second Install: %v", err)
	}
	at := time.Date(2026, 11, 24, 10, 30, 0, 123456000, time.UTC)
	long := strings.Repeat("ключ", 100) // 400 characters
	ds := []httplimit.Denial{
		{Rule: "per-user", Key: "42", Identity: "42", ClientIP: netip.MustParseAddr("2001:db8::1:2:3:4"),
			Method: "GET", Path: "/api/orders", Time: at, Cost: 1, Remaining: 0.25},
		{Rule: "per-key", Key: "8:apikey-1", Identity: "apikey-1", ClientIP: netip.MustParseAddr("198.51.100.7"),
			Method: "POST", Path: "/p\x00\xff", Time: at, Remaining: 0, Shadow: true},
		{Rule: "long", Key: long, Path: "/" + strings.Repeat("x", 300), Time: at, Remaining: 3},
	}
	w, err := pgaudit.NewWriter(pool, pgaudit.Options{RuleID: func(r string) (int64, bool) { return 7, r == "per-user" }})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		w.Deny(d)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(context.Background(), `SELECT bucket_key, user_id, ip_address::text, endpoint, requested_at,
	  tokens_at_time, rule_id, rule_name, shadow FROM ratelimitviolation ORDER BY violation_id`)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		key      string
		user     *int64
		ip       *string
		endpoint *string
		at       time.Time
		tokens   float64
		ruleID   *int64
		rule     string
		shadow   bool
	}
	var got []rec
	for rows.Next() {
		var r rec
		if err := rows.Scan(&r.key, &r.user, &r.ip, &r.endpoint, &r.at, &r.tokens, &r.ruleID, &r.rule, &r.shadow); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if rows.Err() != nil || len(got) != 3 {
		t.Fatalf("%d rows (%v), want 3", len(got), rows.Err())
	}
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	num := func(p *int64) any {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	g := got[0]
	if g.key != "42" || num(g.user) != int64(42) || str(g.ip) != "2001:db8::1:2:3:4/128" || str(g.endpoint) != "GET /api/orders" ||
		!g.at.Equal(at) || g.tokens != 0.25 || num(g.ruleID) != int64(7) || g.rule != "per-user" || g.shadow {
		t.Errorf("row 0: %+v (user %v, ip %s, endpoint %s, rule_id %v)", g, num(g.user), str(g.ip), str(g.endpoint), num(g.ruleID))
	}
	g = got[1]
	if g.key != "8:apikey-1" || g.user != nil || str(g.ip) != "198.51.100.7/32" || str(g.endpoint) != "POST /p\uFFFD\uFFFD" ||
		g.ruleID != nil || g.rule != "per-key" || !g.shadow {
		t.Errorf("row 1: %+v (user %v, ip %s, endpoint %q, rule_id %v)", g, num(g.user), str(g.ip), str(g.endpoint), num(g.ruleID))
	}
	g = got[2]
	if len([]rune(g.key)) != 256 || !strings.HasPrefix(g.key, long[:len("ключ")*50]) || g.ip != nil ||
		len([]rune(str(g.endpoint))) != 255 || g.tokens != 3 {
		t.Errorf("row 2: key of %d characters %q, ip %s, endpoint of %d characters", len([]rune(g.key)), g.key, str(g.ip), len([]rune(str(g.endpoint))))
	}
	// The seed's indexes are there.
	if n := count(t, pool, `SELECT count(*) FROM pg_indexes WHERE tablename = 'ratelimitviolation' AND indexname IN ('idx_violation_user', 'idx_violation_ip')`); n != 2 {
		t.Errorf("%d of the seed's two indexes", n)
	}
}

// A table created from the seed design's own DDL gets the two columns it
// lacks, and is written to.
func TestInstallOnSeedTable(t *testing.T) {
	pool := newPool(t, pgtest.Shared(t).NewDatabase(t))
	_, err := pool.Exec(context.Background(), `CREATE TABLE RateLimitRule (rule_id BIGSERIAL PRIMARY KEY, name TEXT);
	CREATE TABLE RateLimitViolation (
	    violation_id   BIGSERIAL PRIMARY KEY,
	    bucket_key     VARCHAR(256)  NOT NULL,
	    user_id        BIGINT,
	    ip_address     INET,
	    endpoint       VARCHAR(255),
	    requested_at   TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
	    tokens_at_time FLOAT         NOT NULL,
	    rule_id        BIGINT        REFERENCES RateLimitRule(rule_id)
	);
	INSERT INTO RateLimitRule (rule_id, name) VALUES (1, 'known');
	INSERT INTO RateLimitViolation (bucket_key, tokens_at_time) VALUES ('old', 0)`)
	if err != nil {
		t.Fatal(err)
	}
	// The seed's table lacks two columns a Writer writes: Check says so,
	// and is satisfied once Install has added them.
	if err := pgaudit.Check(context.Background(), pool, ""); err == nil || !strings.Contains(err.Error(), "lacks columns") {
		t.Errorf("Check of the seed's table: %v, want it to find columns missing", err)
	}
	if err := pgaudit.Check(context.Background(), pool, "nosuchtable"); err == nil || !strings.Contains(err.Error(), "Install") {
		t.Errorf("Check of a missing table: %v, want it to say how to create it", err)
	}
	if err := pgaudit.Install(context.Background(), pool, pgaudit.Schema{RulesTable: "ratelimitrule"}); err != nil {
		t.Fatal(err)
	}
	if err := pgaudit.Check(context.Background(), pool, ""); err != nil {
		t.Errorf("Check after Install: %v", err)
	}
	// A rule_id the rules table lacks breaks the foreign key: that row
	// alone is rejected.
	w, err := pgaudit.NewWriter(pool, pgaudit.Options{RuleID: func(r string) (int64, bool) {
		if r == "known" {
			return 1, true
		}
		return 99, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"known", "ghost", "known"} {
		w.Deny(httplimit.Denial{Rule: r, Key: "k", Time: time.Now()})
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Written != 2 || s.Rejected != 1 {
		t.Errorf("%+v, want 2 written, 1 rejected", s)
	}
	if n := count(t, pool, `SELECT count(*) FROM RateLimitViolation WHERE rule_name = 'known' AND rule_id = 1`); n != 2 {
		t.Errorf("%d rows of rule known, want 2", n)
	}
}

// Each batch is one COPY, so one transaction: 2,500 denials at most 1,000 to
// a batch are three transactions' rows.
func TestBatchedByCopy(t *testing.T) {
	pool := installed(t, pgaudit.Schema{Table: "audit"})
	w, err := pgaudit.NewWriter(pool, pgaudit.Options{Table: "audit", MaxBatch: 1000, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for range 2500 {
		w.Deny(httplimit.Denial{Rule: "r", Key: "k", Time: time.Now()})
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM audit`); n != 2500 {
		t.Errorf("%d rows, want 2500", n)
	}
	if n := count(t, pool, `SELECT count(DISTINCT xmin::text) FROM audit`); n != 3 {
		t.Errorf("rows written by %d transactions, want 3", n)
	}
	if s := w.Stats(); s.Batches != 3 {
		t.Errorf("%d batches, want 3", s.Batches)
	}
}

// With the database stopped, denied requests are answered as fast as ever;
// the queue fills and the rest are dropped and counted. When it is back,
// everything the queue held is written, and nothing else is lost.
func TestOutage(t *testing.T) {
	// Rows are counted written when their COPY commits: the server must
	// not lose commits when it is stopped at once, as it may with the
	// test servers' synchronous_commit off.
	srv := pgtest.Start(t, "synchronous_commit = on")
	pool := newPool(t, srv.DSN())
	if err := pgaudit.Install(context.Background(), pool, pgaudit.Schema{}); err != nil {
		t.Fatal(err)
	}
	const queue = 200
	w, err := pgaudit.NewWriter(pool, pgaudit.Options{QueueSize: queue, MaxBatch: 50, FlushInterval: 5 * time.Millisecond,
		BatchTimeout: 2 * time.Second, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	rules := []httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 0.001, Burst: 1}}
	lim, err := httplimit.New(rules, httplimit.Options{OnDeny: w.Deny})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	client := 0
	send := func(n int) (denied int, slowest time.Duration) {
		for range n {
			client++ // a new address, with a token for one request
			r := httptest.NewRequest("GET", "/x", nil)
			r.RemoteAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(client >> 8), byte(client)}), 1).String()
			rw := httptest.NewRecorder()
			t0 := time.Now()
			h.ServeHTTP(rw, r) // the address's one token
			h.ServeHTTP(rw, r)
			slowest = max(slowest, time.Since(t0))
			if rw.Code == http.StatusTooManyRequests {
				denied++
			}
		}
		return denied, slowest
	}
	if d, _ := send(100); d != 100 {
		t.Fatalf("%d of 100 denied", d)
	}
	waitFor(t, "100 written", func() bool { return w.Stats().Written == 100 })

	srv.Stop()
	// One denial, then wait until its batch has failed: it is held, and
	// the queue is empty.
	send(1)
	waitFor(t, "a COPY failed", func() bool { return w.Stats().FailedBatches > 0 })
	d, slowest := send(1000)
	if d != 1000 || slowest > time.Second {
		t.Errorf("database down: %d of 1000 denied, the slowest pair of requests took %v", d, slowest)
	}
	s := w.Stats()
	if s.Queued != queue+1 || s.Dropped != 1000-queue {
		t.Errorf("database down: %+v; want %d queued (the queue and the batch held), %d dropped", s, queue+1, 1000-queue)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queue written", func() bool { return w.Stats().Queued == 0 })
	s = w.Stats()
	if want := uint64(100 + 1 + queue); s.Written != want || s.Recorded != 1101 {
		t.Errorf("back: %+v, want %d written of 1101 recorded", s, want)
	}
	balanced(t, s)
	if n := count(t, pool, `SELECT count(*) FROM ratelimitviolation`); uint64(n) != s.Written {
		t.Errorf("%d rows in the table, %d written", n, s.Written)
	}
}
