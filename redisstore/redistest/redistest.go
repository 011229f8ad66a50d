package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a failure.
const RequireEnv = "FAUCET_REQUIRE_REDIS"

// packages names the Debian package of each Redis program.
var packages = map[string]string{"redis-server": "redis-server", "redis-cli": "redis-tools"}

// Binary returns the path of a Redis program (redis-server, redis-cli), or
// skips the test without it (fails it under RequireEnv).
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		pkg := packages[name]
		if pkg == "" {
			pkg = name
		}
		hint := name + " not found: apt-get install -y " + pkg
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s (%s=1)", hint, RequireEnv)
		}
		tb.Skip(hint)
	}
	return p
}

// Server is one redis-server process on loopback. It keeps its port and
// arguments across Kill and Restart, as a server restarted by an operator
// does.
type Server struct {
	bin  string
	args []string
	port int
	mu   sync.Mutex
	// cmd is the process, nil while stopped; exited is closed when it has
	// exited. Both guarded by mu.
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a redis-server with extra arguments after the defaults
// (loopback, no persistence, DEBUG allowed from loopback, warnings only in
// the log) and waits until it answers PING; the test's cleanup kills it.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin := Binary(tb, "redis-server")
	s, err := start(bin, tb.TempDir(), extra)
	if err != nil {
		tb.Fatalf("starting redis-server: %v", err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// start tries a few free ports: one found free may be taken before
// redis-server binds it.
func start(bin, dir string, extra []string) (*Server, error) {
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{bin: bin, port: port}
		s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--enable-debug-command", "local", "--loglevel", "warning"}, extra...)
		if last = s.run(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

// FreePort returns a loopback port nothing listens on right now: an address
// where no server answers, or a port for a server's other listener.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// run starts the process and waits until it answers PING. The process has
// a process group of its own, so that a test's signals reach it alone.
func (s *Server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redis-server is running")
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := Do(s.Addr(), "PING"); err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start", s.port)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server on port %d did not answer PING", s.port)
}

// Restart starts a killed server again on the same port and arguments,
// and waits until it answers PING. Without persistence it starts empty.
func (s *Server) Restart() error {
	var err error
	// After a kill the port may not be free at once: try again.
	for range 5 {
		if err = s.run(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Kill ends the server with SIGKILL, as a crash would (after a SIGCONT,
// should it be stopped), and reaps it. Killing a killed server does
// nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Signal sends sig to the server: SIGSTOP stalls it with its connections
// open, SIGCONT resumes it.
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redis-server is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Do sends one command on a connection of its own to the server.
func (s *Server) Do(args ...string) (string, error) { return Do(s.Addr(), args...) }

// Do sends one command to the Redis server at addr on a connection of its
// own, within 10 s, and returns the reply: a status or bulk string's text,
// an integer in decimal. An error reply is an error. Tests use it to act as
// an operator (CLIENT PAUSE, FLUSHALL, CONFIG RESETSTAT, INFO) without a
// client library's view of the server.
func Do(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, req.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("redis %s: empty reply", args[0])
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", fmt.Errorf("redis %s: %s", args[0], body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis %s: reply %q", args[0], line)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("redis %s: reply %q is not a string or integer", args[0], line)
}

// StartCluster starts three masters with cluster mode on, joins them with
// redis-cli, and waits until every node reports cluster_state:ok.
func StartCluster(tb testing.TB) []*Server {
	tb.Helper()
	cli := Binary(tb, "redis-cli")
	var nodes []*Server
	var addrs []string
	for range 3 {
		s := Start(tb, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(FreePort(tb)),
			"--cluster-config-file", filepath.Join(tb.TempDir(), "nodes.conf"), "--cluster-node-timeout", "5000")
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		for {
			info, _ := Do(a, "CLUSTER", "INFO")
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("cluster not ok on %s:\n%s", a, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nodes
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedDir string
)

// Shared returns one server for the whole test binary, started on first
// use, for tests and benchmarks that each use keys of their own. The
// package's TestMain calls StopShared after m.Run.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	bin := Binary(tb, "redis-server")
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		dir, err := os.MkdirTemp("", "faucet-redistest")
		if err != nil {
			tb.Fatal(err)
		}
		s, err := start(bin, dir, nil)
		if err != nil {
			os.RemoveAll(dir)
			tb.Fatalf("starting redis-server: %v", err)
		}
		shared, sharedDir = s, dir
	}
	return shared
}

// StopShared kills the shared server, if one started, and removes its
// directory.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Kill()
		os.RemoveAll(sharedDir)
	}
	shared, sharedDir = nil, ""
}
