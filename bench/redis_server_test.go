package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/redisstore/redistest"
)

// The Redis benchmarks need one Redis server. bench/redis.sh starts one and
// passes its address in FAUCET_REDIS_ADDR, so that redis-benchmark measures
// the same server; otherwise the first Redis benchmark starts a private
// redis-server on a free loopback port, and TestMain stops it (and the
// PostgreSQL server of BenchmarkPostgres, if one started).

func TestMain(m *testing.M) {
	code := m.Run()
	redistest.StopShared()
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
	return redistest.Shared(b).Addr()
}

// redisScriptTime returns the microseconds the server has spent running
// scripts (EVALSHA and EVAL, the commands they call included), and how many
// it ran, since its statistics were last reset (CONFIG RESETSTAT).
func redisScriptTime(addr string) (usec, calls int64, err error) {
	body, err := redistest.Do(addr, "INFO", "commandstats")
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
