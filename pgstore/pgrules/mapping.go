package pgrules

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/faucetgo/faucet/httplimit"
)

// Row is one row of the table, as far as the rules read it.
type Row struct {
	RuleID        int64
	KeyPattern    string
	Scope         string
	RatePerSecond float64
	BurstCapacity int64
	// Plan is the plan the row applies to; nil (SQL NULL) is every plan.
	Plan *string
}

// Mapping turns rows into httplimit rules (see the package documentation).
// The zero value reads identities and plans from verified JWT claims.
type Mapping struct {
	// UserKey is the limit key of scope "user": where a request's user
	// comes from. "" is DefaultUserKey.
	UserKey string
	// PlanKey is the match key a row's plan is compared with. "" is
	// DefaultPlanKey.
	PlanKey string
}

// The keys of the zero Mapping: claims of the verified bearer token (which
// the httplimit.Options the rules run under must verify: httplimit refuses
// claims nobody verifies).
const (
	DefaultUserKey = "jwt:sub"
	DefaultPlanKey = "jwt:plan"
)

// Check reports a UserKey that is not a limit key or a PlanKey that is not
// a match key, as httplimit reads them.
func (m Mapping) Check() error {
	probe := httplimit.Rule{Name: "probe", LimitKeys: []string{m.userKey()}, Rate: 1, Burst: 1,
		Match: map[string][]string{m.planKey(): {"p"}}, InsecureUnverifiedJWT: true}
	var ce *httplimit.ConfigError
	if err := httplimit.Validate([]httplimit.Rule{probe}, httplimit.Options{}); errors.As(err, &ce) {
		var msgs []string
		for _, p := range ce.Problems {
			what := "plan key"
			if strings.HasPrefix(p.Field, "limit_keys") {
				what = "user key"
			}
			msgs = append(msgs, what+": "+p.Problem)
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

func (m Mapping) userKey() string { return cmp.Or(m.UserKey, DefaultUserKey) }
func (m Mapping) planKey() string { return cmp.Or(m.PlanKey, DefaultPlanKey) }

// Rules maps rows onto rules that opts accepts (httplimit.KeepValid), rows
// with a plan first, then by rule_id. The rows it leaves out are in a
// *RowsError, returned with the others; with none left, the rules are nil.
func (m Mapping) Rules(rows []Row, opts httplimit.Options) ([]httplimit.Rule, error) {
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("pgrules: mapping: %v", err)
	}
	rows = slices.Clone(rows)
	// Tiers: among rules with the same limit keys, the first that matches
	// applies, so a plan's row must come before the row for every plan.
	slices.SortStableFunc(rows, func(a, b Row) int {
		if (a.Plan == nil) != (b.Plan == nil) {
			if a.Plan == nil {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.RuleID, b.RuleID)
	})
	var probs []*Problem
	var mapped []httplimit.Rule
	var ids []int64
	for _, row := range rows {
		r, rp := m.rule(row)
		if len(rp) > 0 {
			// Check what can be checked still, to report every problem.
			rp = append(rp, m.limitProblems(row)...)
			probs = append(probs, rp...)
			continue
		}
		mapped = append(mapped, r)
		ids = append(ids, row.RuleID)
	}
	kept, err := httplimit.KeepValid(mapped, opts)
	var ce *httplimit.ConfigError
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			if p.Index >= 0 {
				probs = append(probs, fromField(ids[p.Index], p))
			}
		}
	} else if err != nil {
		return nil, err
	}
	if len(mapped) == 0 {
		kept = nil
	}
	if len(probs) == 0 {
		return kept, nil
	}
	slices.SortStableFunc(probs, func(a, b *Problem) int { return cmp.Compare(a.RuleID, b.RuleID) })
	return kept, &RowsError{Problems: probs}
}

// RuleName is the name of the rule a row with ruleID becomes: "rule-"
// and the id, in RateLimit headers, metrics and logs.
func RuleName(ruleID int64) string { return "rule-" + strconv.FormatInt(ruleID, 10) }

// RuleIDOf is the rule_id of a rule named by RuleName, for records that
// refer to the row (pgaudit.Options.RuleID); false for any other name.
func RuleIDOf(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, "rule-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || RuleName(id) != name {
		return 0, false
	}
	return id, true
}

// rule maps a row, or reports every reason it cannot be.
func (m Mapping) rule(row Row) (httplimit.Rule, []*Problem) {
	var probs []*Problem
	bad := func(column, format string, args ...any) {
		probs = append(probs, &Problem{RuleID: row.RuleID, Column: column, Problem: fmt.Sprintf(format, args...)})
	}
	r := httplimit.Rule{Name: RuleName(row.RuleID), Rate: row.RatePerSecond, Burst: float64(row.BurstCapacity)}
	prefix, rest, _ := strings.Cut(row.KeyPattern, ":")
	switch row.Scope {
	case "ip", "user":
		if prefix != row.Scope || !placeholder.MatchString(rest) {
			bad("key_pattern", "scope %q takes %q (one bucket per %s), got %q", row.Scope, row.Scope+":{<name>}", scopeWhat[row.Scope], row.KeyPattern)
		}
		r.LimitKeys = []string{"ip:address"}
		if row.Scope == "user" {
			r.LimitKeys = []string{m.userKey()}
		}
	case "endpoint":
		if prefix != "endpoint" || !exactPath.MatchString(rest) {
			bad("key_pattern", `scope "endpoint" takes "endpoint:/<path>", an exact path without placeholders, wildcards or a query, got %q`, row.KeyPattern)
		}
		r.LimitKeys = []string{"path"}
		r.Match = map[string][]string{"path": {rest}}
	case "global":
		if row.KeyPattern != "global" {
			bad("key_pattern", `scope "global" takes "global" (one bucket for every request), got %q`, row.KeyPattern)
		}
		r.LimitKeys = []string{"global"}
	default:
		bad("scope", `must be "user", "endpoint", "global" or "ip", got %q`, row.Scope)
	}
	if row.Plan != nil {
		if *row.Plan == "" {
			bad("plan", `must be NULL (every plan) or a plan's name, got ""`)
		}
		if r.Match == nil {
			r.Match = map[string][]string{}
		}
		r.Match[m.planKey()] = []string{*row.Plan}
	}
	return r, probs
}

var (
	placeholder = regexp.MustCompile(`^\{[A-Za-z_][A-Za-z0-9_]*\}$`)
	exactPath   = regexp.MustCompile(`^/[^\s{}*?#]*$`)
	scopeWhat   = map[string]string{"ip": "client address", "user": "user"}
)

// limitProblems are the problems of a row's rate and burst alone, for a row
// that could not be mapped.
func (m Mapping) limitProblems(row Row) []*Problem {
	probe := httplimit.Rule{Name: "probe", LimitKeys: []string{"ip:address"}, Rate: row.RatePerSecond, Burst: float64(row.BurstCapacity)}
	var ce *httplimit.ConfigError
	var out []*Problem
	if errors.As(httplimit.Validate([]httplimit.Rule{probe}, httplimit.Options{}), &ce) {
		for _, p := range ce.Problems {
			out = append(out, fromField(row.RuleID, p))
		}
	}
	return out
}

// columns are the table's names for the fields httplimit reports.
var columns = []struct{ field, column string }{
	{"algorithm_config.tokens_per_second", "rate_per_second"},
	{"algorithm_config.burst", "burst_capacity"},
	{"limit_keys", "key_pattern"},
	{"match.path", "key_pattern"},
	{"match", "plan"}, // the plan's match key, or the rule as a tier
}

// otherRule is how httplimit names another rule in a message.
var otherRule = regexp.MustCompile(`rule "rule-(\d+)" \(rules\[\d+\]\)`)

// fromField is httplimit's problem with a row's rule, in the table's words.
func fromField(id int64, p *httplimit.FieldError) *Problem {
	col := p.Field
	for _, c := range columns {
		if strings.HasPrefix(p.Field, c.field) {
			col = c.column
			break
		}
	}
	msg := otherRule.ReplaceAllString(p.Problem, "rule $1")
	// A row has no insecure_unverified_jwt to set.
	msg = strings.Replace(msg, `, or set "insecure_unverified_jwt": true to accept unverified claims`, ", or read users and plans from other keys", 1)
	if m := otherRule.FindStringSubmatch(p.Problem); p.Field == "match" && m != nil {
		// A tier that can never apply: two rows with the same plan, or an
		// earlier one for every plan, whose keys give the same buckets.
		col = "key_pattern"
		msg = "the rule can never apply: rule " + m[1] + " comes first, keys requests the same way and has the same plan or applies to every plan"
	}
	return &Problem{RuleID: id, Column: col, Problem: msg}
}

// Problem is one problem with one column of a row.
type Problem struct {
	RuleID  int64
	Column  string
	Problem string
}

func (p *Problem) Error() string {
	return "rule " + strconv.FormatInt(p.RuleID, 10) + ": " + p.Column + ": " + p.Problem
}

// RowsError lists the rows left out of a reading, each with every problem,
// in rule_id order.
type RowsError struct {
	Problems []*Problem
}

// RuleIDs are the rows left out, once each.
func (e *RowsError) RuleIDs() []int64 {
	var ids []int64
	for _, p := range e.Problems {
		if len(ids) == 0 || ids[len(ids)-1] != p.RuleID {
			ids = append(ids, p.RuleID)
		}
	}
	return ids
}

func (e *RowsError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return "pgrules: rows left out:\n  " + strings.Join(lines, "\n  ")
}
