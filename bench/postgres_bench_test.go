package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/pgstore"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgScenarios are BenchmarkPostgres's key sets, each with a limit under
// which both answers occur at the rates this machine reaches (thousands of
// checks a second). One hot key is a flood: 1000 tokens a second, burst
// 100, so most checks are denied and the admitted ones contend for the row.
// 1e4 keys is ordinary traffic: a token a second per key, burst 1, so a
// key's first check in a run is admitted and the checks that follow it
// within a second mostly denied; the share admitted falls as a limiter
// gets faster (admit/op says how much).
var pgScenarios = []struct {
	keys int
	lim  limit
}{
	{1, limit{rate: 1000, burst: 100}},
	{10_000, limit{rate: 1, burst: 1}},
}

// pgMaxConns is the pool's size: one connection for each of the most
// callers, so no caller waits for a connection rather than the database.
const pgMaxConns = 64

// pgTimeout bounds every check, generous so that a slow moment shows in the
// latency rather than as a failure: at 64 callers on two cores single checks
// of both PostgreSQL implementations took up to 0.7 s, and one over a
// second.
const pgTimeout = 10 * time.Second

// pgImpl is one way to check a limit shared by the instances of a service.
type pgImpl struct {
	// name is the benchmark label; see impl.name.
	name string
	// new returns a check at lim on pool, whose tables are empty.
	new func(b *testing.B, pool *pgxpool.Pool, lim limit) (*pgCheck, error)
}

// pgCheck is a limiter under test and what it says of its server.
type pgCheck struct {
	check redisCheck
	// stmts counts the statements (scripts, for Redis) the server has run
	// so far.
	stmts func() (int64, error)
	// serverCPU is the CPU time the server's processes have used so far;
	// ok is false where it cannot be read.
	serverCPU func() (cpu time.Duration, ok bool)
	close     func()
}

// pgImpls are the implementations, in the order of the results.
var pgImpls = []pgImpl{faucetPgImpl, faucetSinglePgImpl, forUpdateImpl, faucetRedisPgImpl}

// BenchmarkPostgres checks a limit kept in one local PostgreSQL from 1, 16
// and 64 concurrent callers, on one hot key and on 1e4 keys (pgScenarios),
// with pgstore (faucet; faucet_single with coalescing off, a statement per
// check), the common SELECT ... FOR UPDATE transaction
// (for_update, see forUpdate) on the same pool of 64 connections, and, for
// the choice between the two stores, redisstore on a local redis-server
// (faucet_redis, as BenchmarkRedis's faucet). Each run starts with empty
// tables (and an emptied Redis) and callers that walk the keys in random
// order, as BenchmarkRedis's do: checks/s is their throughput together,
// p50-ns and p99-ns the latency of single calls, admit/op the share
// admitted, stmts/op the statements (scripts, for Redis) the server ran per
// check, and cpu-ns/op the machine's CPU time per check (all processes:
// client and server share the machine's cores).
func BenchmarkPostgres(b *testing.B) {
	for _, sc := range pgScenarios {
		keys := keys13(sc.keys)
		seq := uniformSeq(sc.keys)
		for _, im := range pgImpls {
			for _, callers := range redisCallers {
				b.Run(fmt.Sprintf("keys=%d/impl=%s/callers=%d", sc.keys, im.name, callers), func(b *testing.B) {
					benchPgImpl(b, im, sc.lim, callers, keys, seq)
				})
			}
		}
	}
}

// benchPgImpl measures im at lim from callers callers, from empty tables.
func benchPgImpl(b *testing.B, im pgImpl, lim limit, callers int, keys []string, seq []int32) {
	pool := pgPool(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "TRUNCATE "+pgstore.DefaultTable+", "+forUpdateTable); err != nil {
		b.Fatal(err)
	}
	pc, err := im.new(b, pool, lim)
	if err != nil {
		b.Fatal(err)
	}
	defer pc.close()
	// Every caller's first checks open its connection and prepare the
	// statements: before the timer, on keys of their own.
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range 2 {
				if _, err := pc.check(ctx, "warm-up:"+strconv.Itoa(c)+":"+strconv.Itoa(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	s0, err := pc.stmts()
	if err != nil {
		b.Fatal(err)
	}
	client0 := processCPU()
	server0, serverOK := pc.serverCPU()
	elapsed, admitted, all := runCallers(b, pc.check, callers, keys, seq)
	client1 := processCPU()
	server1, _ := pc.serverCPU()
	s1, err := pc.stmts()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
	b.ReportMetric(float64(all.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(all.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
	b.ReportMetric(float64(s1-s0)/float64(b.N), "stmts/op")
	b.ReportMetric(float64(client1-client0)/float64(b.N), "client-cpu-ns/op")
	if serverOK {
		b.ReportMetric(float64(server1-server0)/float64(b.N), "server-cpu-ns/op")
	}
}

// faucetPgImpl is pgstore: a check is a statement, shared with the
// checks of its key that arrive while the key's previous statement is in
// flight (coalescing).
var faucetPgImpl = pgstoreImpl("faucet", false)

// faucetSinglePgImpl is pgstore with coalescing off
// (Config.DisableCoalescing): one statement per check, however many wait
// for the same row.
var faucetSinglePgImpl = pgstoreImpl("faucet_single", true)

// pgstoreImpl is pgstore under name, with coalescing off if single.
func pgstoreImpl(name string, single bool) pgImpl {
	return pgImpl{
		name: name,
		new: func(b *testing.B, pool *pgxpool.Pool, lim limit) (*pgCheck, error) {
			l, err := pgstore.New(pool, pgstore.Config{Limit: engine.Limit(lim.rate), Burst: float64(lim.burst), Prefix: "bench:",
				Timeout: pgTimeout, DisableCoalescing: single})
			if err != nil {
				return nil, err
			}
			return &pgCheck{
				check: func(ctx context.Context, key string) (bool, error) {
					d, err := l.Take(ctx, key, 1)
					return d.Allowed, err
				},
				stmts:     func() (int64, error) { return int64(l.Stats().Calls), nil },
				serverCPU: pgServerCPU(b, pool),
				close:     func() { l.Close() },
			}, nil
		},
	}
}

// forUpdateImpl is the SELECT ... FOR UPDATE transaction (forUpdate).
var forUpdateImpl = pgImpl{
	name: "for_update",
	new: func(b *testing.B, pool *pgxpool.Pool, lim limit) (*pgCheck, error) {
		f := newForUpdate(pool, "bench", lim, pgTimeout)
		return &pgCheck{
			check:     func(ctx context.Context, key string) (bool, error) { return f.take(ctx, key, 1) },
			stmts:     func() (int64, error) { return f.stmts.Load(), nil },
			serverCPU: pgServerCPU(b, pool),
			close:     func() {},
		}, nil
	},
}

// faucetRedisPgImpl is redisstore per check on rueidis, as BenchmarkRedis's
// faucet, at the scenario's limit: what the same checks cost in Redis.
var faucetRedisPgImpl = pgImpl{
	name: "faucet_redis",
	new: func(b *testing.B, _ *pgxpool.Pool, lim limit) (*pgCheck, error) {
		addr := redisAddr(b)
		if _, err := redistest.Do(addr, "FLUSHALL"); err != nil {
			return nil, err
		}
		pid := 0
		if info, err := redistest.Do(addr, "INFO", "server"); err == nil {
			for line := range strings.SplitSeq(info, "\r\n") {
				if v, ok := strings.CutPrefix(line, "process_id:"); ok {
					pid, _ = strconv.Atoi(v)
				}
			}
		}
		l, closeFn, err := rueLimiter(addr, lim)
		if err != nil {
			return nil, err
		}
		return &pgCheck{
			check: redisstoreCheck(l),
			stmts: func() (int64, error) {
				_, calls, err := redisScriptTime(addr)
				return calls, err
			},
			serverCPU: func() (time.Duration, bool) { return procCPU(pid, false) },
			close:     closeFn,
		}, nil
	},
}

// The benchmarks and TestForUpdatePeer share one PostgreSQL server
// (pgtest.Shared: it skips without PostgreSQL, or fails with
// FAUCET_REQUIRE_POSTGRES=1) and one pool on a database of their own, with
// pgstore's schema and the peer's table; TestMain closes both.
var pgOnce struct {
	sync.Mutex
	pool *pgxpool.Pool
}

// pgPool returns the shared pool, creating it on first use.
func pgPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	srv := pgtest.Shared(tb)
	pgOnce.Lock()
	defer pgOnce.Unlock()
	if pgOnce.pool != nil {
		return pgOnce.pool
	}
	cfg, err := pgxpool.ParseConfig(srv.NewDatabase(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = pgMaxConns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pgstore.Install(ctx, pool, pgstore.Schema{}); err != nil {
		pool.Close()
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, forUpdateSchema); err != nil {
		pool.Close()
		tb.Fatal(err)
	}
	pgOnce.pool = pool
	return pool
}

// closePostgres closes the shared pool and stops the shared server.
func closePostgres() {
	pgOnce.Lock()
	if pgOnce.pool != nil {
		pgOnce.pool.Close()
		pgOnce.pool = nil
	}
	pgOnce.Unlock()
	pgtest.StopShared()
}

// pgServerCPU returns the CPU time of the PostgreSQL server behind pool:
// the postmaster's and its children's, backends that have exited included.
func pgServerCPU(b *testing.B, pool *pgxpool.Pool) func() (time.Duration, bool) {
	var backend int
	if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatal(err)
	}
	postmaster := 0
	if st, ok := procStat(backend); ok {
		postmaster, _ = strconv.Atoi(st[1])
	}
	return func() (time.Duration, bool) {
		if postmaster == 0 {
			return 0, false
		}
		return procCPU(postmaster, true)
	}
}

// procCPU returns the user and system CPU time of process pid, and with
// children of its children too, the children they have waited for included
// (Linux's /proc, in clock ticks of 10 ms); ok is false where it cannot be
// read.
func procCPU(pid int, children bool) (cpu time.Duration, ok bool) {
	pids := []int{pid}
	if children {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return 0, false
		}
		for _, e := range ents {
			if n, err := strconv.Atoi(e.Name()); err == nil && n != pid {
				pids = append(pids, n)
			}
		}
	}
	parent := strconv.Itoa(pid)
	var ticks int64
	for i, p := range pids {
		st, found := procStat(p)
		if !found || i > 0 && st[1] != parent {
			continue
		}
		ok = ok || i == 0
		for _, f := range st[11:15] { // utime stime cutime cstime
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond, ok
}

// procStat returns the fields of /proc/pid/stat after the command's name,
// the process's state first (so the parent is [1] and utime [11]).
func procStat(pid int) ([]string, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(data[i+1:]))
	return f, len(f) >= 15
}

// processCPU returns this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
