package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"
)

// The scripts are the embedded files without their documentation: each
// bucket script starts with the library, and no comment line of a file's
// header reaches Redis.
func TestScriptsAreTheEmbeddedFiles(t *testing.T) {
	lib := luaScript("lib.lua")
	for name, s := range map[string]string{"take_each": takeEachScript, "take": takeScript, "refund": refundScript, "lease": leaseScript, "release": releaseScript} {
		if !strings.HasPrefix(s, lib+"\n") {
			t.Errorf("%s does not start with lib.lua", name)
		}
	}
	for name, s := range map[string]string{"lib": lib, "lease_lib": luaScript("lease_lib.lua"), "quota_lib": luaScript("quota_lib.lua"),
		"window_lib": luaScript("window_lib.lua"), "take_each": takeEachScript, "heartbeat": heartbeatScript} {
		if !strings.HasPrefix(s, "\nlocal ") || strings.Contains(s, "\n-- "+strings.TrimSuffix(name, "_lib")+" ") {
			t.Errorf("%s: its documentation was sent: %.80q", name, s)
		}
	}
	if !strings.HasSuffix(takeScript, "return finish()\n") || !strings.Contains(leaseScript, "local function loadLeased(key)") {
		t.Error("the take or lease script is not the embedded file's")
	}
}

// What a Limiter and a Store's heartbeat run on the server is the embedded
// text: after a take of each client and a heartbeat, Redis holds scripts
// whose SHA-1 is the embedded scripts'.
func TestServerRunsTheEmbeddedScripts(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	for _, c := range []client{rueClient{newRue(t, s.Addr())}, goRedisClient{newGoRedis(t, s.Addr())}} {
		l, err := newLimiter(c, Config{Limit: 1, Burst: 5, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := heartbeat(c, "hb:", time.Second)(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{"take_each": takeEachScript, "heartbeat": heartbeatScript} {
		sum := sha1.Sum([]byte(text))
		got := fmt.Sprint(admin(t, s.Addr(), "SCRIPT", "EXISTS", hex.EncodeToString(sum[:])))
		if got != "[1]" {
			t.Errorf("%s: SCRIPT EXISTS of the embedded text = %s, want [1]", name, got)
		}
	}
}
