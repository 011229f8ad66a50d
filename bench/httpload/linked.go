//go:build linked

package main

// Built with -tags linked, httpload carries what faucet serve links besides
// its own code: every package of faucet's that serve imports, and through
// them the gRPC, Envoy, Postgres, Redis, JWT and Prometheus libraries, with
// the descriptors and registries their init functions build. Its proxy is
// then the plain proxy in a binary of serve's weight, and the difference
// between the two proxies is what that weight costs a request, apart from
// anything serve does.
import (
	_ "github.com/faucetgo/faucet/engine"
	_ "github.com/faucetgo/faucet/grpclimit/envoyrls"
	_ "github.com/faucetgo/faucet/httplimit"
	_ "github.com/faucetgo/faucet/jwtverify"
	_ "github.com/faucetgo/faucet/pgstore"
	_ "github.com/faucetgo/faucet/pgstore/pgaudit"
	_ "github.com/faucetgo/faucet/pgstore/pgrules"
	_ "github.com/faucetgo/faucet/redisstore"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/prometheus/collectors"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/rueidis"
	_ "gonum.org/v1/plot/vg/vgsvg"
	_ "google.golang.org/grpc/health"
	_ "google.golang.org/grpc/reflection"
)
