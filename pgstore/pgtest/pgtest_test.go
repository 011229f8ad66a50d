package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStartRestart(t *testing.T) {
	s := Start(t)
	dsn := s.NewDatabase(t)
	query := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		var n int
		return c.QueryRow(ctx, "SELECT 1").Scan(&n)
	}
	if err := query(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := query(); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := query(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
