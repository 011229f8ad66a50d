package pgstore

import (
	"context"
	"testing"
)

// BenchmarkTake is one caller's check against a local server, next to the
// round trip it cannot avoid (SELECT 1 on the same pool): what the function
// itself costs. The peers and the Redis store are compared in the bench
// module (BenchmarkPostgres).
func BenchmarkTake(b *testing.B) {
	db := newDB(b, Schema{})
	ctx := context.Background()
	b.Run("op=select1", func(b *testing.B) {
		var n int
		for b.Loop() {
			if err := db.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name  string
		limit float64
		n     float64
	}{
		{"op=allow", 1e9, 1},  // always refilled: every take writes
		{"op=deny", 0.001, 2}, // never passes: reads only
		{"op=peek", 1, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := New(db, Config{Limit: 1e9, Burst: 1, Prefix: uniquePrefix(), Timeout: testTimeout})
			if tc.limit < 1e9 {
				l, err = New(db, Config{Limit: 0.001, Burst: 1, Prefix: uniquePrefix(), Timeout: testTimeout})
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Take(ctx, "k", 1); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := l.Take(ctx, "k", tc.n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
