package redisstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The tests run real redis-server processes on loopback, each on its own
// free port and in its own temporary directory, and stop them at cleanup.
// Without the binary they skip, unless FAUCET_REQUIRE_REDIS=1 (as in CI):
// then a missing server fails them.

const installHint = "redis-server not found: apt-get install -y redis-server"

// needBinary returns the path of a Redis binary or skips (fails) the test.
func needBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("FAUCET_REQUIRE_REDIS") == "1" {
			t.Fatalf("%s (FAUCET_REQUIRE_REDIS=1)", installHint)
		}
		t.Skip(installHint)
	}
	return p
}

// server is one redis-server process.
type server struct {
	t    testing.TB
	bin  string
	args []string
	port int
	cmd  *exec.Cmd
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// freePort returns a loopback port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startRedis starts a redis-server with extra arguments, no persistence, and
// waits until it answers PING.
func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := needBinary(t, "redis-server")
	var last error
	for range 5 {
		s := &server{t: t, bin: bin, port: freePort(t)}
		s.args = append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
			"--enable-debug-command", "local", "--loglevel", "warning"}, extra...)
		if last = s.start(); last == nil {
			t.Cleanup(s.kill)
			return s
		}
	}
	t.Fatalf("starting redis-server: %v", last)
	return nil
}

// start runs the process (again, after kill) and waits for PING.
func (s *server) start() error {
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.addr(), 100*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			buf := make([]byte, 7)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return nil
			}
		}
		if s.cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("redis-server on port %d did not answer PING", s.port)
}

// kill stops the process with SIGKILL (after a SIGCONT, should it be
// stopped) and reaps it.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// rueClient returns a rueidis client for addrs, closed at cleanup.
func newRue(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newGoRedis returns a go-redis client for addr, closed at cleanup.
func newGoRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// admin runs one command on addr with a fresh connection.
func admin(t testing.TB, addr string, args ...any) any {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 10 * time.Second})
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// cluster starts three masters with cluster mode on and joins them, waiting
// until every node reports cluster_state:ok.
func startCluster(t testing.TB) []*server {
	t.Helper()
	cli := needBinary(t, "redis-cli")
	var nodes []*server
	var addrs []string
	for range 3 {
		s := startRedis(t, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(freePort(t)),
			"--cluster-config-file", filepath.Join(t.TempDir(), "nodes.conf"), "--cluster-node-timeout", "5000")
		nodes = append(nodes, s)
		addrs = append(addrs, s.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		for {
			info, _ := admin(t, a, "CLUSTER", "INFO").(string)
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok on %s:\n%s", a, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nodes
}

// newGoRedisNoT is a go-redis client without test cleanup, for probes.
func newGoRedisNoT(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
}
