package failpolicy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

func TestPeersCountsAtLeastOne(t *testing.T) {
	var p Peers
	if p.N() != 1 || p.Known() || p.Share() != 1 {
		t.Errorf("zero Peers: N %d, known %v, share %v; want 1, false, 1", p.N(), p.Known(), p.Share())
	}
	p.Set(4)
	if p.N() != 4 || !p.Known() || p.Share() != 0.25 {
		t.Errorf("after Set(4): N %d, known %v, share %v", p.N(), p.Known(), p.Share())
	}
	p.Set(0)
	if p.N() != 1 {
		t.Errorf("after Set(0): N %d, want 1 (the instance counting)", p.N())
	}
	var nilPeers *Peers
	if nilPeers.N() != 1 || nilPeers.Known() {
		t.Error("a nil Peers must count 1 and know nothing")
	}
}

// Retune gives the engine its share, at least one token of burst, and never
// more than the whole burst.
func TestRetune(t *testing.T) {
	for _, tc := range []struct {
		limit        engine.Limit
		burst, share float64
		wantL        engine.Limit
		wantB        float64
	}{
		{10, 100, 0.25, 2.5, 25},
		{10, 100, 1.0 / 3, 10 * engine.Limit(1.0/3), 33.333},
		{10, 100, 0.001, 0.01, 1}, // one token at least
		{10, 100, 1, 10, 100},     // back to the whole limit
	} {
		e, err := engine.New(SharedFallback(tc.limit, tc.burst, 0))
		if err != nil {
			t.Fatal(err)
		}
		Retune(e, tc.limit, tc.burst, tc.share)
		if e.Limit() != tc.wantL || e.Burst() != tc.wantB {
			t.Errorf("Retune(%v, %v, share %v): limit %v burst %v, want %v and %v", tc.limit, tc.burst, tc.share, e.Limit(), e.Burst(), tc.wantL, tc.wantB)
		}
		e.Close()
	}
}

// With Peers, Answer gives the fallback engine 1/N of the limit before it
// decides, and follows N as it changes.
func TestAnswerFollowsPeers(t *testing.T) {
	e, err := engine.New(SharedFallback(0.001, 12, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var p Peers
	p.Set(3)
	admitted := func(key string, n int) int {
		a := 0
		for range n {
			out := make([]engine.Decision, 1)
			if k, fellBack := Answer([]Take{{Policy: Fallback, Fallback: e, Peers: &p, Limit: 0.001, Burst: 12, Key: key, N: 1}}, out); k < 0 && fellBack {
				a++
			}
		}
		return a
	}
	if got := admitted("a", 10); got != 4 {
		t.Errorf("3 instances, burst 12: the fallback admitted %d, want 4", got)
	}
	p.Set(6)
	if got := admitted("b", 10); got != 2 {
		t.Errorf("6 instances, burst 12: the fallback admitted %d, want 2", got)
	}
}

// Heartbeat records each count, keeps the last one through failures, reports
// them, and stops when told.
func TestHeartbeat(t *testing.T) {
	var calls atomic.Int64
	var errs atomic.Int64
	beat := func(ctx context.Context) (int, error) {
		switch calls.Add(1) {
		case 1:
			return 3, nil
		case 2, 3:
			return 0, errors.New("store down")
		}
		return 2, nil
	}
	var p Peers
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		Heartbeat(stop, time.Millisecond, time.Second, beat, &p, func(error) { errs.Add(1) })
		close(done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for calls.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	<-done
	if p.N() != 2 || errs.Load() != 2 {
		t.Errorf("after beats 3, fail, fail, 2...: N %d, errors %d; want 2 and 2", p.N(), errs.Load())
	}
}

// The Peers of a store's Config exclude a fixed share and any policy but
// Fallback.
func TestCheckPeers(t *testing.T) {
	var p Peers
	if _, err := Check(Fallback, 10, 10, 0.5, 0, &p); err == nil {
		t.Error("Peers with a FallbackShare: no error")
	}
	if _, err := Check(FailOpen, 10, 10, 0, 0, &p); err == nil {
		t.Error("Peers with FailOpen: no error")
	}
	cfg, err := Check(Fallback, 10, 10, 0, 0, &p)
	if err != nil || cfg.Limit != 10 || cfg.Burst != 10 || cfg.MaxKeys != DefaultFallbackMaxKeys {
		t.Errorf("Check with Peers: %+v, %v; want the whole limit and the default MaxKeys", cfg, err)
	}
}

// A calendar quota's fallback keeps 1/N of the quota (Peers) or a fixed
// share, over the quota's calendar, at least a token, retuned as they
// change, and decides a take with its own calendar.
func TestAnswerQuotaFollowsPeers(t *testing.T) {
	daily := engine.Calendar{Period: engine.Daily}
	q, err := engine.NewQuota(engine.QuotaConfig{Quota: 12, Calendar: daily, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var p Peers
	p.Set(3)
	weekly := engine.Calendar{Period: engine.Weekly}
	admitted := func(key string, n int, peers *Peers, share float64, cal *engine.Calendar) int {
		a := 0
		for range n {
			out := make([]engine.Decision, 1)
			tk := Take{Policy: Fallback, Quota: q, QuotaCalendar: daily, Peers: peers, Share: share, Burst: 12, Key: key, N: 1, Calendar: cal}
			if k, fellBack := Answer([]Take{tk}, out); k < 0 && fellBack {
				a++
			}
		}
		return a
	}
	if got := admitted("a", 10, &p, 0, nil); got != 4 || q.Burst() != 4 {
		t.Errorf("3 instances, quota 12: the fallback admitted %d (quota %v), want 4", got, q.Burst())
	}
	if got := admitted("b", 10, nil, 0.25, &weekly); got != 3 || q.Calendar() != daily {
		t.Errorf("a share of 1/4 of 12: the fallback admitted %d, calendar %+v; want 3, daily", got, q.Calendar())
	}
	if got := QuotaShare(12, 0.01); got != 1 {
		t.Errorf("QuotaShare(12, 0.01) = %v, want 1: at least a token", got)
	}
	if got := QuotaShare(0.5, 0.1); got != 0.5 {
		t.Errorf("QuotaShare(0.5, 0.1) = %v, want 0.5: a quota below a token, whole", got)
	}
}

// A strict window's fallback keeps 1/N of the limit (Peers) or a fixed
// share, at least a token, retuned as they change.
func TestAnswerWindowFollowsPeers(t *testing.T) {
	w, err := engine.NewWindow(engine.WindowConfig{Limit: 12, Window: time.Hour, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var p Peers
	p.Set(3)
	admitted := func(key string, n int, peers *Peers, share float64) int {
		a := 0
		for range n {
			out := make([]engine.Decision, 1)
			tk := Take{Policy: Fallback, Window: w, Peers: peers, Share: share, Burst: 12, Key: key, N: 1}
			if k, fellBack := Answer([]Take{tk}, out); k < 0 && fellBack {
				a++
			}
		}
		return a
	}
	if got := admitted("a", 10, &p, 0); got != 4 || w.Burst() != 4 {
		t.Errorf("3 instances, limit 12: the fallback admitted %d (limit %v), want 4", got, w.Burst())
	}
	if got := admitted("b", 10, nil, 0.25); got != 3 || w.Burst() != 3 {
		t.Errorf("a share of 1/4 of 12: the fallback admitted %d (limit %v), want 3", got, w.Burst())
	}
}
