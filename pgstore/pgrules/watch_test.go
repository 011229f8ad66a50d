package pgrules_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// startWatcher installs the table in db with rows, reads it and runs a
// Watcher of it until the test ends; deliveries go to the channel.
func startWatcher(t *testing.T, db *pgxpool.Pool, o pgrules.WatchOptions, exec func(string, ...any)) (*pgrules.Watcher, []httplimit.Rule, <-chan delivery) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := pgrules.Install(ctx, db, "", ""); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO ratelimitrule (rule_id, key_pattern, scope, rate_per_second, burst_capacity) VALUES
		(1, 'ip:{ip}', 'ip', 0.001, 3), (2, 'global', 'global', 100, 1000)`)
	w, err := pgrules.NewWatcher(&pgrules.Source{DB: db, Mapping: headerKeys}, o)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := w.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan delivery, 100)
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx, func(r []httplimit.Rule, err error) { got <- delivery{r, err} }) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w, rules, got
}

func hasRule(name string) func(delivery) bool {
	return func(d delivery) bool { return slices.Contains(names(d.rules), name) }
}

// A change to the table is in force as soon as its notification arrives
// (the poll is an hour away), and a rule left unchanged keeps its buckets.
func TestWatchNotifiedKeepsUnchangedBuckets(t *testing.T) {
	db, exec := newDB(t)
	_, rules, got := startWatcher(t, db, pgrules.WatchOptions{Poll: time.Hour}, exec)
	lim, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	status := func(ip string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ip + ":1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 3 {
		status("192.0.2.1")
	}
	if c := status("192.0.2.1"); c != 429 {
		t.Fatalf("after the burst of 3: %d, want 429", c)
	}

	exec(`INSERT INTO ratelimitrule (rule_id, key_pattern, scope, rate_per_second, burst_capacity) VALUES (3, 'endpoint:/x', 'endpoint', 1, 1)`)
	d := waitFor(t, got, "the inserted rule-3", hasRule("rule-3"))
	if err := lim.Reload(d.rules); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE ratelimitrule SET burst_capacity = 2000 WHERE rule_id = 2`)
	d = waitFor(t, got, "rule-2's new burst", func(d delivery) bool {
		i := slices.Index(names(d.rules), "rule-2")
		return i >= 0 && d.rules[i].Burst == 2000
	})
	if err := lim.Reload(d.rules); err != nil {
		t.Fatal(err)
	}
	if c := status("192.0.2.1"); c != 429 {
		t.Errorf("rule-1 unchanged over two reloads: %d, want 429 (its bucket kept, still empty)", c)
	}
	if c := status("192.0.2.2"); c != 200 {
		t.Errorf("another client: %d, want 200", c)
	}
	exec(`DELETE FROM ratelimitrule WHERE rule_id = 1`)
	d = waitFor(t, got, "rule-1 gone", func(d delivery) bool { return !hasRule("rule-1")(d) })
	if err := lim.Reload(d.rules); err != nil {
		t.Fatal(err)
	}
	if c := status("192.0.2.1"); c != 200 {
		t.Errorf("rule-1 deleted: %d, want 200", c)
	}
	exec(`UPDATE ratelimitrule SET rate_per_second = -1 WHERE rule_id = 3`)
	d = waitFor(t, got, "rule 3's problem", func(d delivery) bool { return d.err != nil })
	if want := []string{"rule-2"}; !slices.Equal(names(d.rules), want) {
		t.Errorf("rule 3 made bad: rules %q, want %q; err %v", names(d.rules), want, d.err)
	}
}

// Readings that do not change are not delivered; Refresh delivers one
// anyway.
func TestWatchDeliversChangesAndRefresh(t *testing.T) {
	db, exec := newDB(t)
	w, _, got := startWatcher(t, db, pgrules.WatchOptions{Poll: 50 * time.Millisecond}, exec)
	exec(`UPDATE ratelimitrule SET description = 'says nothing to the rules'`)
	select {
	case d := <-got:
		t.Fatalf("delivered %q, %v without a change of the rules", names(d.rules), d.err)
	case <-time.After(time.Second):
	}
	w.Refresh()
	waitFor(t, got, "the rules on Refresh", hasRule("rule-1"))
}

// With the trigger gone nothing is notified: the poll still finds the
// change.
func TestWatchPollsWithoutNotifications(t *testing.T) {
	db, exec := newDB(t)
	_, _, got := startWatcher(t, db, pgrules.WatchOptions{Poll: 200 * time.Millisecond}, exec)
	exec(`DROP TRIGGER faucet_rules_notify ON ratelimitrule`)
	exec(`INSERT INTO ratelimitrule (rule_id, key_pattern, scope, rate_per_second, burst_capacity) VALUES (3, 'endpoint:/x', 'endpoint', 1, 1)`)
	waitFor(t, got, "rule-3, polled", hasRule("rule-3"))
}

// After the server restarts, the Watcher listens again: a change is
// notified, with the poll an hour away.
func TestWatchListensAgainAfterRestart(t *testing.T) {
	s := pgtest.Start(t)
	db, err := pgxpool.New(context.Background(), s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(sql string, args ...any) {
		t.Helper()
		s.Exec(t, sql, args...)
	}
	lost := make(chan error, 100)
	o := pgrules.WatchOptions{Poll: time.Hour, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
		OnListenError: func(err error) { lost <- err }}
	_, _, got := startWatcher(t, db, o, exec)
	// The table is on disk whatever the server's commit settings: an
	// immediate shutdown may lose what is not.
	exec(`CHECKPOINT`)
	s.Stop()
	select {
	case <-lost:
	case <-time.After(time.Minute):
		t.Fatal("the listening connection's failure was not reported")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO ratelimitrule (rule_id, key_pattern, scope, rate_per_second, burst_capacity) VALUES (3, 'endpoint:/x', 'endpoint', 1, 1)`)
	waitFor(t, got, "rule-3 after the restart", hasRule("rule-3"))
}

// A row added to another's key_pattern and plan turns that row's rule
// into a group of two limits, and the first row keeps its bucket; when the
// second row goes, the first is a plain rule again, its bucket still kept.
func TestWatchGroupKeepsBuckets(t *testing.T) {
	db, exec := newDB(t)
	_, rules, got := startWatcher(t, db, pgrules.WatchOptions{Poll: time.Hour}, exec)
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	lim, err := httplimit.New(rules, httplimit.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	check := func() httplimit.Result {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		return lim.Check(r)
	}
	remaining := func(res httplimit.Result, name string) float64 {
		t.Helper()
		for _, p := range res.Policies {
			if p.Name == name {
				return p.Remaining
			}
		}
		t.Fatalf("no policy %q in %+v", name, res.Policies)
		return 0
	}
	check()
	if res := check(); remaining(res, "rule-1") != 1 {
		t.Fatalf("rule-1 after two requests: %+v, want 1 of 3 left", res.Policies)
	}

	exec(`INSERT INTO ratelimitrule (rule_id, key_pattern, scope, rate_per_second, burst_capacity, quota_period) VALUES (3, 'ip:{ip}', 'ip', 0, 100, 'day')`)
	d := waitFor(t, got, "group-1", hasRule("group-1"))
	if d.err != nil {
		t.Fatal(d.err)
	}
	i := slices.Index(names(d.rules), "group-1")
	if l := d.rules[i].Limits; len(l) != 2 || l[0].Name != "rule-1" || l[1].Name != "rule-3" || l[1].Period != "day" {
		t.Fatalf("group-1's limits %+v, want rule-1 and rule-3's daily quota", l)
	}
	if err := lim.Reload(d.rules); err != nil {
		t.Fatal(err)
	}
	res := check()
	if !res.Allowed || remaining(res, "rule-1") != 0 || remaining(res, "rule-3") != 99 {
		t.Fatalf("first request after the reload: %+v, want allowed, rule-1's bucket kept (0 left), rule-3's quota new (99 left)", res)
	}
	if res := check(); res.Allowed || res.DeniedBy != "rule-1" || remaining(res, "rule-3") != 99 {
		t.Errorf("next request: %+v, want denied by rule-1, rule-3 charged nothing", res)
	}

	exec(`DELETE FROM ratelimitrule WHERE rule_id = 3`)
	d = waitFor(t, got, "rule-1 alone again", hasRule("rule-1"))
	if err := lim.Reload(d.rules); err != nil {
		t.Fatal(err)
	}
	if res := check(); res.Allowed || res.DeniedBy != "rule-1" {
		t.Errorf("rule-1 a plain rule again: %+v, want denied by rule-1 (its bucket kept, still empty)", res)
	}
}
