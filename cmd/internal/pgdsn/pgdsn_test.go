package pgdsn

import (
	"strings"
	"testing"
)

func TestPGConfigRefusesPasswords(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:secret@127.0.0.1/db",
		"postgresql://u:@127.0.0.1/db",
		"postgres://u@127.0.0.1/db?password=secret",
		"host=127.0.0.1 user=u password=secret",
		"host=127.0.0.1 PASSWORD=secret",
		"host=127.0.0.1 password = secret",
		"password =secret host=127.0.0.1",
	} {
		_, err := Config("postgres", dsn)
		if err == nil || !strings.Contains(err.Error(), "--postgres") || !strings.Contains(err.Error(), "PGPASSWORD") {
			t.Errorf("%q: got %v, want a refusal naming --postgres and PGPASSWORD", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error repeats the password: %v", dsn, err)
		}
	}
	for _, dsn := range []string{
		"postgres://u@127.0.0.1:5432/db?sslmode=disable",
		"host=127.0.0.1 user=u dbname=db",
		"host=127.0.0.1 user=password_admin dbname=db",
	} {
		if _, err := Config("postgres", dsn); err != nil {
			t.Errorf("%q: %v", dsn, err)
		}
	}
	if _, err := Config("rules-db", "postgres://[::1"); err == nil || !strings.HasPrefix(err.Error(), "--rules-db") {
		t.Errorf("a bad DSN: got %v, want an error naming --rules-db", err)
	}
}
