package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Redis benchmarks need one Redis server. bench/redis.sh starts one and
// passes its address in FAUCET_REDIS_ADDR, so that redis-benchmark measures
// the same server; otherwise the first Redis benchmark starts a private
// redis-server on a free loopback port, and TestMain stops it (and the
// PostgreSQL server of BenchmarkPostgres, if one started).

var redisOnce struct {
	sync.Once
	addr string
	cmd  *exec.Cmd
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c := redisOnce.cmd; c != nil {
		c.Process.Kill()
		c.Wait()
		os.RemoveAll(redisOnce.dir)
	}
	closePostgres()
	os.Exit(code)
}

// redisAddr returns the address of the benchmarks' Redis server, or skips
// the benchmark when there is none (it fails instead when
// FAUCET_REQUIRE_REDIS=1, as in CI).
func redisAddr(b *testing.B) string {
	b.Helper()
	if a := os.Getenv("FAUCET_REDIS_ADDR"); a != "" {
		return a
	}
	redisOnce.Do(func() { redisOnce.addr, redisOnce.err = startRedis() })
	if redisOnce.err != nil {
		if os.Getenv("FAUCET_REQUIRE_REDIS") == "1" {
			b.Fatalf("FAUCET_REQUIRE_REDIS=1: %v", redisOnce.err)
		}
		b.Skipf("%v", redisOnce.err)
	}
	return redisOnce.addr
}

// startRedis runs redis-server without persistence on a free loopback port
// and waits until it answers PING.
func startRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found: apt-get install -y redis-server")
	}
	dir, err := os.MkdirTemp("", "faucet-bench-redis")
	if err != nil {
		return "", err
	}
	// A port found free may be taken before redis-server binds it; try a
	// few times.
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		l.Close()
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", "")
		if err := cmd.Start(); err != nil {
			return "", err
		}
		if pingRedis(addr, 5*time.Second) == nil {
			redisOnce.cmd, redisOnce.dir = cmd, dir
			return addr, nil
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	os.RemoveAll(dir)
	return "", fmt.Errorf("redis-server did not start on a loopback port")
}

// pingRedis waits up to d for the server at addr to answer PING.
func pingRedis(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := redisCommand(addr, "PING")
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisScriptTime returns the microseconds the server has spent running
// scripts (EVALSHA and EVAL, the commands they call included), and how many
// it ran, since its statistics were last reset (CONFIG RESETSTAT).
func redisScriptTime(addr string) (usec, calls int64, err error) {
	body, err := redisInfo(addr, "commandstats")
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(body, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for kv := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if k != "usec" && k != "calls" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("INFO commandstats: %q", line)
			}
			if k == "usec" {
				usec += n
			} else {
				calls += n
			}
		}
	}
	return usec, calls, nil
}

// redisInfo returns a section of INFO's reply, lines ending in CRLF.
func redisInfo(addr, section string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "INFO %s\r\n", section); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	var n int
	if _, err := fmt.Sscanf(head, "$%d", &n); err != nil {
		return "", fmt.Errorf("INFO %s: %q", section, head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// redisCommand sends one inline command (no arguments with spaces) and
// fails unless the reply is a status line: enough for PING, FLUSHALL and
// CONFIG RESETSTAT without taking a client library's view of the server.
func redisCommand(addr, cmd string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+") {
		return fmt.Errorf("redis %s: %s", cmd, strings.TrimSpace(line))
	}
	return nil
}
