package httplimit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// The "global" limit key gives every request one bucket, whatever its
// client, path or headers.
func TestGlobalKeyIsOneBucket(t *testing.T) {
	l, _ := newRuleLimiter(t, httplimit.Options{},
		httplimit.Rule{Name: "all", LimitKeys: []string{"global"}, Rate: 1.0 / 3600, Burst: 3})
	targets := []string{"/a", "/b?x=1", "/c"}
	for i, target := range targets {
		if w := serve(l, req("192.0.2."+strconv.Itoa(i+1)+":1", target)); w.Code != 200 {
			t.Fatalf("request %d from its own client: %d, want 200", i, w.Code)
		}
	}
	if w := serve(l, req("198.51.100.9:1", "/d", "X-Api-Key", "k")); w.Code != 429 {
		t.Fatalf("fourth request from yet another client: %d, want 429: the three before drained the one bucket", w.Code)
	}
}

// KeepValid drops each bad rule with all its problems, and keeps the rest:
// a rule that can never apply only because of a bad rule before it stays.
func TestKeepValid(t *testing.T) {
	rules := []httplimit.Rule{
		{Name: "bad-rate", LimitKeys: []string{"ip:address"}, Rate: -1, Burst: 0.5},
		{Name: "after-bad", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 2},
		{Name: "dead", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 2},
		{Name: "jwt", LimitKeys: []string{"jwt:sub"}, Rate: 1, Burst: 2},
		{Name: "after-bad", LimitKeys: []string{"path"}, Rate: 1, Burst: 2},
		{Name: "global", LimitKeys: []string{"global"}, Rate: 1, Burst: 2},
	}
	kept, err := httplimit.KeepValid(rules, httplimit.Options{})
	var names []string
	for _, r := range kept {
		names = append(names, r.Name)
	}
	if want := []string{"after-bad", "global"}; !slices.Equal(names, want) {
		t.Errorf("kept %q, want %q", names, want)
	}
	var ce *httplimit.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConfigError", err)
	}
	got := map[int][]string{}
	for _, p := range ce.Problems {
		got[p.Index] = append(got[p.Index], p.Field)
	}
	want := map[int][]string{
		0: {"algorithm_config.tokens_per_second", "algorithm_config.burst"},
		2: {"match"},
		3: {"limit_keys[0]"},
		4: {"name"},
	}
	for i, fields := range want {
		if !slices.Equal(got[i], fields) {
			t.Errorf("rules[%d]: problems with %q, want %q\n%v", i, got[i], fields, err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems for rules %v, want for %v\n%v", got, want, err)
	}
	if _, err := httplimit.New(kept, httplimit.Options{}); err != nil {
		t.Errorf("New refuses what KeepValid kept: %v", err)
	}
	if kept, err := httplimit.KeepValid(rules[:1], httplimit.Options{}); kept != nil || err == nil {
		t.Errorf("no good rule: kept %v, err %v; want none and an error", kept, err)
	}
}

func TestFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	var src httplimit.RuleSource = httplimit.FileSource(path)
	if _, err := src.Rules(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	os.WriteFile(path, []byte(perIP), 0o644)
	rules, err := src.Rules(context.Background())
	if err != nil || len(rules) != 1 || rules[0].Name != "per-ip" {
		t.Errorf("Rules = %v, %v; want per-ip", rules, err)
	}
	os.WriteFile(path, []byte(strings.Replace(perIP, `"burst":20`, `"burst":2`, 1)), 0o644)
	rules, err = src.Rules(context.Background())
	if rules != nil || err == nil || !strings.Contains(err.Error(), path+": httplimit: invalid rules") {
		t.Errorf("bad file: %v, %v; want no rules and the file's problems", rules, err)
	}
}
