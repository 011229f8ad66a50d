package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv is the environment variable that turns a missing PostgreSQL
// into a failure.
const RequireEnv = "FAUCET_REQUIRE_POSTGRES"

const installHint = "PostgreSQL not found (initdb and postgres): apt-get install -y postgresql"

// Server is one PostgreSQL server on loopback, owned by a test.
type Server struct {
	bin  string // directory of initdb and postgres
	dir  string // holds data/ and the server's socket and log
	port int
	cred *syscall.Credential
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	dbs  atomic.Int64
}

// binDir finds the directory holding initdb and postgres: the PATH, else
// Debian's /usr/lib/postgresql/<version>/bin (the newest).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if q, err := exec.LookPath("postgres"); err == nil && filepath.Dir(p) == filepath.Dir(q) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New(installHint)
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// need returns the binaries' directory or skips (fails, under RequireEnv)
// the test.
func need(tb testing.TB) string {
	tb.Helper()
	d, err := binDir()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%v (%s=1)", err, RequireEnv)
		}
		tb.Skip(err.Error())
	}
	return d
}

// credential is the unprivileged user the server runs as when the test runs
// as root: "postgres" (which Debian's package creates), else "nobody".
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and neither user postgres nor nobody exists to run PostgreSQL as")
}

// Start initialises a database cluster in a temporary directory and starts
// PostgreSQL on a free loopback port; the test's cleanup stops it and
// removes the directory. The server trusts local connections from user
// "faucet" and trades durability against a crash of the machine for speed
// (fsync off: WAL reaches the operating system, not the disk), which keeps
// what a crash of PostgreSQL itself (Stop) keeps: it is for tests.
func Start(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	s, err := start(need(tb), settings)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.close)
	return s
}

// close stops the server and removes its files.
func (s *Server) close() {
	s.Stop()
	os.RemoveAll(s.dir)
}

func start(bin string, settings []string) (s *Server, err error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "faucet-pgtest-")
	if err != nil {
		return nil, err
	}
	s = &Server{bin: bin, dir: dir, cred: cred}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "faucet",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = ''",
		"fsync = off", "full_page_writes = off",
		"max_connections = 300", "shared_buffers = '128MB'",
		"logging_collector = off", "log_min_messages = warning",
	}
	conf = append(conf, settings...)
	f, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString("\n" + strings.Join(conf, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 {
		s.port = freePort()
		if last = s.Restart(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// freePort returns a loopback port nothing listens on right now.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// DSN is the connection string of database "postgres" as user "faucet".
func (s *Server) DSN() string { return s.DSNOf("postgres") }

// DSNOf is the connection string of database db.
func (s *Server) DSNOf(db string) string {
	return fmt.Sprintf("postgres://faucet@%s/%s?sslmode=disable", s.Addr(), db)
}

// NewDatabase creates an empty database and returns its connection string:
// tests sharing one server each take their own.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	return s.DSNOf(name)
}

// Restart starts a stopped server on the same port and data, and waits
// until it accepts queries.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: server already running")
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	cmd.Dir = s.dir
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.DSN())
		if err == nil {
			_, err = c.Exec(ctx, "SELECT 1")
			c.Close(ctx)
		}
		cancel()
		if err == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("postgres exited: %s", tail(log))
		default:
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return fmt.Errorf("postgres did not accept connections within 60 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Stop shuts the server down at once (SIGQUIT: clients are disconnected,
// nothing waits), as a crash would but for the crash recovery on restart.
// Stopping a stopped server does nothing.
func (s *Server) Stop() { s.signal(syscall.SIGQUIT) }

// StopClean shuts the server down cleanly (SIGINT, PostgreSQL's fast
// shutdown: clients are disconnected, data written out), as an
// administrator's restart would.
func (s *Server) StopClean() { s.signal(syscall.SIGINT) }

// Pause stops every process of the server (SIGSTOP): connections stay
// open and nothing answers, as a stalled server. Resume undoes it.
func (s *Server) Pause() { s.groupSignal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.groupSignal(syscall.SIGCONT) }

// groupSignal signals the postmaster and its children, which PostgreSQL
// puts in sessions of their own (so not the process group).
func (s *Server) groupSignal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	syscall.Kill(pid, sig)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
			syscall.Kill(child, sig)
		}
	}
}

// Kill ends the server with SIGKILL.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	syscall.Kill(s.cmd.Process.Pid, sig)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	// Children left by an immediate shutdown go with the process group.
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd, s.done = nil, nil
}

// Exec runs SQL as the superuser on database "postgres", for tests that
// act as an operator (pg_terminate_backend, ALTER SYSTEM ...).
func (s *Server) Exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	if err := s.ExecDSN(s.DSN(), sql, args...); err != nil {
		tb.Fatal(err)
	}
}

// ExecDSN runs SQL on the database of dsn.
func (s *Server) ExecDSN(dsn, sql string, args ...any) error {
	return withConn(dsn, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, sql, args...)
		return err
	})
}

// QueryRow runs a query on the database of dsn and scans its one row into
// dst.
func QueryRow(dsn, sql string, dst ...any) error {
	return withConn(dsn, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, sql).Scan(dst...)
	})
}

// withConn runs f on a connection of its own to dsn, within 30 s.
func withConn(dsn string, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return f(ctx, c)
}

var (
	sharedMu sync.Mutex
	shared   *Server
)

// Shared returns one server for the whole test binary, started on first
// use; each test takes its own database (NewDatabase) or names. The
// package's TestMain calls StopShared after m.Run.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	bin := need(tb)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		s, err := start(bin, nil)
		if err != nil {
			tb.Fatal(err)
		}
		shared = s
	}
	return shared
}

// StopShared stops the shared server, if one started, and removes its
// files.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.close()
	}
	shared = nil
}
