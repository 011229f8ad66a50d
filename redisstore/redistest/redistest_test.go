package redistest

import (
	"strings"
	"syscall"
	"testing"
)

// A server answers, loses its data when killed, and answers again on the
// same address after Restart.
func TestStartKillRestart(t *testing.T) {
	s := Start(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v; want v", v, err)
	}
	s.Kill()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("a killed server answered")
	}
	s.Kill() // a second Kill does nothing
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("EXISTS", "k"); err != nil || v != "0" {
		t.Fatalf("EXISTS k after restart = %q, %v; want 0 (no persistence)", v, err)
	}
	if err := s.Restart(); err == nil {
		t.Error("Restart of a running server succeeded")
	}
}

// Do returns status, integer and bulk replies as text and error replies as
// errors.
func TestDo(t *testing.T) {
	s := Shared(t)
	t.Cleanup(StopShared)
	if v, err := s.Do("PING"); err != nil || v != "PONG" {
		t.Errorf("PING = %q, %v", v, err)
	}
	if v, err := s.Do("INFO", "server"); err != nil || !strings.Contains(v, "redis_version:") {
		t.Errorf("INFO server = %q, %v", v, err)
	}
	if _, err := s.Do("NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "ERR") {
		t.Errorf("an unknown command: %v, want the server's error", err)
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("PING"); err != nil || v != "PONG" {
		t.Errorf("PING after SIGCONT = %q, %v", v, err)
	}
}
