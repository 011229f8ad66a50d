package redisstore

import (
	"embed"
	"strings"
)

// The scripts live in the .lua files of lua/, embedded in the package, so
// that they read (and diff) as Lua. Each file starts with comment lines that
// document it, which are not sent; lib.lua is the library every bucket
// script starts with, lease_lib.lua the lease scripts' after it.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var (
	// takeEachScript makes a batch of one Limiter's takes, each as if
	// alone (lua/take_each.lua).
	takeEachScript = luaScript("lib.lua", "take_each.lua")
	// takeScript makes the takes of a TakeAll, all or none
	// (lua/take.lua).
	takeScript = luaScript("lib.lua", "quota_lib.lua", "window_lib.lua", "take.lua")
	// refundScript gives back a take of a TakeAll that was denied later
	// (lua/refund.lua).
	refundScript = luaScript("lib.lua", "quota_lib.lua", "window_lib.lua", "refund.lua")
	// leaseScript grants a lease (lua/lease.lua).
	leaseScript = luaScript("lib.lua", "lease_lib.lua", "lease.lua")
	// releaseScript ends a lease early (lua/release.lua).
	releaseScript = luaScript("lib.lua", "lease_lib.lua", "release.lua")
	// heartbeatScript records an instance and counts those alive
	// (lua/heartbeat.lua).
	heartbeatScript = luaScript("heartbeat.lua")
	// slotsAcquireScript, slotsReleaseScript and slotsRenewScript keep
	// in-flight slots (lua/slots_*.lua).
	slotsAcquireScript = luaScript("slots_acquire.lua")
	slotsReleaseScript = luaScript("slots_release.lua")
	slotsRenewScript   = luaScript("slots_renew.lua")
)

// luaScript is the script made of files of lua/, in order: each file's
// text without its documentation, after a newline.
func luaScript(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		text, err := luaFiles.ReadFile("lua/" + f)
		if err != nil {
			// The files are the package's own: a missing one is a bug
			// that every test shows.
			panic(err)
		}
		b.WriteString("\n")
		b.WriteString(withoutDoc(string(text)))
	}
	return b.String()
}

// withoutDoc is text without its leading comment and blank lines.
func withoutDoc(text string) string {
	for strings.HasPrefix(text, "--") || strings.HasPrefix(text, "\n") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return text
}
