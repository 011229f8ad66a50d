package settings

import (
	"flag"
	"strings"
	"testing"
)

// The default connection cap leaves descriptors beyond the client
// connections and their upstream ones.
func TestDefaultMaxConnsLeavesAReserve(t *testing.T) {
	n, ok := OpenFileLimit()
	if !ok {
		t.Skip("no open-file limit")
	}
	got := uint64(defaultMaxConns())
	if got != maxConnsCeiling && 2*got+min(fdReserve, n/4) > n {
		t.Errorf("defaultMaxConns %d with %d descriptors: twice it and the reserve exceed the limit", got, n)
	}
}

// --http-engine takes nethttp or fasthttp, with every other flag.
func TestHTTPEngineFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in a problem, or "" for none
	}{
		{nil, ""},
		{[]string{"--http-engine", "nethttp"}, ""},
		{[]string{"--http-engine", "fasthttp"}, ""},
		{[]string{"--http-engine", "fasthttp", "--upstream", "http://u", "--upgrade", "websocket"}, ""},
		{[]string{"--http-engine", "nethttp", "--upstream", "http://u", "--upgrade", "websocket"}, ""},
		{[]string{"--http-engine", "FastHTTP"}, `--http-engine: must be nethttp or fasthttp, got "FastHTTP"`},
		{[]string{"--http-engine", ""}, `--http-engine: must be nethttp or fasthttp, got ""`},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var s Serve
		s.Register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		_, problems := s.Options()
		got := strings.Join(problems, "\n")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%q: problems %q, want %q", c.args, got, c.want)
		}
	}
}
