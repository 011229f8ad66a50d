package main

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
)

func runTapBench(t *testing.T, withTap bool) float64 {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	var opts []grpc.ServerOption
	var l net.Listener = ln
	if withTap {
		c, _ := conncap.New(ln, conncap.Config{Max: 100, Wait: time.Second, Calls: true})
		l = c
		var calls atomic.Int64
		opts = append(opts, grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			calls.Add(1)
			var conn *conncap.Conn
			if p, ok := peer.FromContext(ctx); ok {
				conn = c.Begin(p.Addr)
			}
			call, cancel := context.WithTimeout(ctx, 30*time.Second)
			context.AfterFunc(ctx, func() { cancel(); conn.End(); calls.Add(-1) })
			return call, nil
		}))
	}
	srv := grpc.NewServer(opts...)
	h := health.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	go srv.Serve(l)
	defer srv.Stop()
	cc, _ := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
	var n atomic.Int64
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	defer func() {
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		t.Logf("tap=%v: %.2f µs CPU per call", withTap, float64(cpu.Microseconds())/float64(n.Load()))
	}()
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / 3
}

func TestTmpTapCost(t *testing.T) {
	if os.Getenv("TAPBENCH") == "" {
		t.Skip()
	}
	for r := range 4 {
		a := runTapBench(t, false)
		b := runTapBench(t, true)
		t.Logf("round %d: no tap %.0f calls/s, tap+conncap %.0f calls/s (%+.1f%%)", r, a, b, 100*(b-a)/a)
	}
}
