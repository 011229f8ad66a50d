package main

import (
	"fmt"
	"strings"
)

// peerModules are the modules the peers' adapters in bench/ use, by impl.
var peerModules = []struct{ impl, module string }{
	{"xtime, xtime_syncmap, xtime_xsyncmap", "golang.org/x/time"},
	{"xtime_xsyncmap", "github.com/puzpuzpuz/xsync/v3"},
	{"sethvargo", "github.com/sethvargo/go-limiter"},
	{"juju", "github.com/juju/ratelimit"},
	{"uber", "go.uber.org/ratelimit"},
	{"throttled", "github.com/throttled/throttled/v2"},
	{"ulule", "github.com/ulule/limiter/v3"},
	{"redis_rate", "github.com/go-redis/redis_rate/v10"},
	{"redis_rate, faucet_goredis", "github.com/redis/go-redis/v9"},
	{"faucet (redisstore), noop_rueidis", "github.com/redis/rueidis"},
	{"envoy_ratelimit", "github.com/envoyproxy/ratelimit"},
}

// goMod is bench's go.mod, from the directory report runs in.
var goMod = "go.mod"

// peersSection lists the peers' modules at the versions bench/go.mod
// requires.
func peersSection() string {
	var b strings.Builder
	section(&b, 2, peersHeading)
	b.WriteString("The versions [`bench/go.mod`](bench/go.mod) requires.\n\n")
	b.WriteString("| impl | module | version |\n|---|---|---|\n")
	for _, p := range peerModules {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.impl, p.module, moduleVersion(p.module))
	}
	return b.String()
}

// moduleVersion is the version of module that bench's go.mod requires, or
// "?" if it requires none.
func moduleVersion(module string) string {
	for line := range strings.Lines(readFile(goMod)) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require"))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return "?"
}
