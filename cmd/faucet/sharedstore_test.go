package main

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore"
	"github.com/faucetgo/faucet/pgstore/pgtest"
)

// sharedStore is the store of a shared-load run: the flags that put serve
// on it, and the faults it can be put through while the load goes on.
type sharedStore struct {
	name string   // "postgres" or "redis"
	args []string // serve's flags for it
	// slow keeps the store from answering the hot key for d, its callers
	// waiting, and returns when it answers again.
	slow func(d time.Duration)
	// restart stops the store, leaves it down for down, starts it again
	// on the same address and returns when it accepts connections.
	restart func(down time.Duration)
	// restartLoses reports whether a restart empties the buckets: each
	// is full again after it, one more burst.
	restartLoses bool
}

// newSharedStore starts store ("postgres" or "redis") for the test, or
// skips (fails, under FAUCET_REQUIRE_POSTGRES=1 or FAUCET_REQUIRE_REDIS=1)
// without its binaries. Faults report their own failures with tb.Errorf:
// they run beside the load, not on the test's goroutine.
func newSharedStore(tb testing.TB, store string) *sharedStore {
	tb.Helper()
	switch store {
	case "postgres":
		return postgresShared(tb)
	case "redis":
		return redisShared(tb)
	}
	tb.Fatalf("no store %q", store)
	return nil
}

func postgresShared(tb testing.TB) *sharedStore {
	srv := pgtest.Start(tb)
	dsn := srv.DSN()
	return &sharedStore{
		name: "postgres",
		// Every instance may install: the schema's statements take a
		// lock, and serve starts the instances one after another.
		args: []string{"--postgres", dsn, "--postgres-install"},
		// Another transaction holds the rows locked, the hot key's among
		// them: every write of it waits, as behind a slow writer.
		slow: func(d time.Duration) {
			sql := fmt.Sprintf("BEGIN; SELECT 1 FROM %s FOR UPDATE; SELECT pg_sleep(%g); COMMIT", pgstore.DefaultTable, d.Seconds())
			if err := srv.ExecDSN(dsn, sql); err != nil {
				tb.Errorf("holding the hot row locked: %v", err)
			}
		},
		// A clean stop (as an administrator's restart) keeps the
		// UNLOGGED bucket table; a crash would empty it.
		restart: func(down time.Duration) {
			srv.StopClean()
			time.Sleep(down)
			if err := srv.Restart(); err != nil {
				tb.Errorf("restarting PostgreSQL: %v", err)
			}
		},
	}
}

func redisShared(tb testing.TB) *sharedStore {
	r := startRedisProc(tb)
	return &sharedStore{
		name: "redis",
		args: []string{"--redis", r.addr},
		// CLIENT PAUSE holds every client's commands, scripts included,
		// until it ends.
		slow: func(d time.Duration) {
			if err := r.command("CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL"); err != nil {
				tb.Errorf("CLIENT PAUSE: %v", err)
				return
			}
			time.Sleep(d)
		},
		// The server runs without persistence: a restart empties it.
		restart: func(down time.Duration) {
			r.kill()
			time.Sleep(down)
			if err := r.start(); err != nil {
				tb.Errorf("restarting redis-server: %v", err)
			}
		},
		restartLoses: true,
	}
}

// redisProc is a redis-server without persistence on a loopback port that
// it keeps across restarts.
type redisProc struct {
	bin, dir, addr string
	mu             sync.Mutex
	// cmd is the server, nil while stopped, and exited is closed when
	// it has exited; both guarded by mu.
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedisProc starts redis-server on a free loopback port until the
// test ends. Without the binary the test skips, or fails when
// FAUCET_REQUIRE_REDIS=1.
func startRedisProc(tb testing.TB) *redisProc {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if requireEnv("FAUCET_REQUIRE_REDIS") {
			tb.Fatal("FAUCET_REQUIRE_REDIS=1 and redis-server not found: apt-get install -y redis-server")
		}
		tb.Skip("redis-server not found: apt-get install -y redis-server")
	}
	r := &redisProc{bin: bin, dir: tb.TempDir()}
	tb.Cleanup(r.kill)
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		r.addr = l.Addr().String()
		l.Close()
		if err = r.start(); err == nil {
			return r
		}
	}
	tb.Fatalf("redis-server did not start: %v", err)
	return nil
}

// start runs the server on r.addr and waits until it accepts connections.
func (r *redisProc) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, port, _ := net.SplitHostPort(r.addr)
	for range 5 {
		cmd := exec.Command(r.bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
	wait:
		for range 250 {
			if c, err := net.Dial("tcp", r.addr); err == nil {
				c.Close()
				r.cmd, r.exited = cmd, exited
				return nil
			}
			select {
			case <-exited:
				break wait
			case <-time.After(20 * time.Millisecond):
			}
		}
		cmd.Process.Kill()
		<-exited
		// After a kill the port may not be free yet: try again.
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redis-server did not listen on %s", r.addr)
}

// kill ends the server at once, as a crash would.
func (r *redisProc) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.cmd.Process.Kill()
		<-r.exited
		r.cmd, r.exited = nil, nil
	}
}

// command sends one command on a connection of its own and checks that
// the answer is not an error.
func (r *redisProc) command(args ...string) error {
	c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		req += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if len(line) > 0 && line[0] == '-' {
		return fmt.Errorf("%s", line[1:len(line)-2])
	}
	return nil
}
