package main

import (
	"runtime/debug"
	"strings"
)

// buildVersion describes this binary for `faucet version`.
func buildVersion() string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return versionLine(bi)
}

// versionLine reads what the go command recorded in a build: the module
// version, the revision of the checkout it was built in and the Go release.
// A version the go command could not tell (a build without module or VCS
// information, such as `go run` outside a checkout) reads "(devel)", as the
// go command itself writes it; what is unknown is left out rather than
// printed empty.
func versionLine(bi *debug.BuildInfo) string {
	if bi == nil {
		return "faucet (devel)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	words := []string{"faucet", v}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		words = append(words, "revision", rev)
		if at != "" {
			words = append(words, at)
		}
		if modified {
			words = append(words, "(modified)")
		}
	}
	if bi.GoVersion != "" {
		words = append(words, bi.GoVersion)
	}
	return strings.Join(words, " ")
}
