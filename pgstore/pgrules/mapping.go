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

	// QuotaPeriod makes the row a calendar quota of BurstCapacity tokens
	// per period: "day", "week", "month" or "year", with RatePerSecond 0;
	// nil (SQL NULL) is a token bucket.
	QuotaPeriod *string
	// TimeZone is the IANA name of the zone whose calendar a quota's
	// periods follow; nil is UTC.
	TimeZone *string
	// AnchorMonth, AnchorDay, AnchorWeekday and AnchorHour are where a
	// quota's periods begin (httplimit.Anchor); nil is the default:
	// January, the 1st, Monday, midnight.
	AnchorMonth, AnchorDay, AnchorHour *int
	AnchorWeekday                      *string
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

// Rules maps rows onto rules that opts accepts (httplimit.KeepValid): one
// rule for the rows sharing a scope, key_pattern and plan, those with a
// plan first, then by their lowest rule_id. The rows it leaves out are in a
// *RowsError, returned with the others; with none left, the rules are nil.
func (m Mapping) Rules(rows []Row, opts httplimit.Options) ([]httplimit.Rule, error) {
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("pgrules: mapping: %v", err)
	}
	var probs []*Problem
	var mapped []httplimit.Rule
	var groups [][]Row // the rows of each mapped rule
	for _, g := range groupRows(rows) {
		r, gp := m.rule(g)
		if len(gp) > 0 {
			probs = append(probs, gp...)
			continue
		}
		mapped = append(mapped, r)
		groups = append(groups, g)
	}
	kept, err := httplimit.KeepValid(mapped, opts)
	var ce *httplimit.ConfigError
	if errors.As(err, &ce) {
		byRule := make([][]*Problem, len(mapped))
		for _, p := range ce.Problems {
			if p.Index >= 0 {
				byRule[p.Index] = append(byRule[p.Index], fromField(groups[p.Index], p)...)
			}
		}
		for i, gp := range byRule {
			if len(gp) > 0 {
				probs = append(probs, withSiblings(groups[i], gp)...)
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

// groupRows sorts rows into groups sharing a scope, key_pattern and plan,
// each by rule_id, and the groups in rule order: those with a plan first,
// then by their lowest rule_id.
func groupRows(rows []Row) [][]Row {
	rows = slices.Clone(rows)
	// Tiers: among rules with the same limit keys, the first that matches
	// applies, so a plan's rule must come before the rule for every plan.
	slices.SortStableFunc(rows, func(a, b Row) int {
		if (a.Plan == nil) != (b.Plan == nil) {
			if a.Plan == nil {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.RuleID, b.RuleID)
	})
	type key struct {
		scope, pattern, plan string
		anyPlan              bool
	}
	index := map[key]int{}
	var groups [][]Row
	for _, row := range rows {
		k := key{scope: row.Scope, pattern: row.KeyPattern, anyPlan: row.Plan == nil}
		if row.Plan != nil {
			k.plan = *row.Plan
		}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], row)
	}
	return groups
}

// RuleName is the name of the rule a row with ruleID becomes when no other
// row shares its scope, key_pattern and plan, or else of the row's limit
// in its group's rule (GroupName): "rule-" and the id, in RateLimit
// headers, metrics and logs. So a row keeps its buckets when a row joins
// it or leaves it: httplimit names a limit's buckets, as a rule's, by its
// name and limit keys.
func RuleName(ruleID int64) string { return "rule-" + strconv.FormatInt(ruleID, 10) }

// GroupName is the name of the rule that rows sharing a scope, key_pattern
// and plan become, one limit per row, when they are several (or one
// calendar quota): "group-" and the lowest rule_id of them.
func GroupName(minRuleID int64) string { return "group-" + strconv.FormatInt(minRuleID, 10) }

// RuleIDOf is the rule_id of a rule or limit named by RuleName, for records
// that refer to the row (pgaudit.Options.RuleID); false for any other
// name, a GroupName among them (a group is several rows).
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

// rule maps a group of rows (groupRows) onto one rule, or reports every
// reason it cannot be. A lone token bucket is a plain rule; anything else
// a rule with one limit per row.
func (m Mapping) rule(g []Row) (httplimit.Rule, []*Problem) {
	r, keyProbs := m.keys(g[0])
	var probs []*Problem
	limits := make([]httplimit.Limit, len(g))
	for i, row := range g {
		// The rows share the columns the key comes from: each has their
		// problems.
		for _, p := range keyProbs {
			probs = append(probs, &Problem{RuleID: row.RuleID, Column: p.Column, Problem: p.Problem})
		}
		var lp []*Problem
		limits[i], lp = limitOf(row)
		probs = append(probs, lp...)
	}
	if len(probs) > 0 {
		// Check what can be checked still, to report every problem.
		for i, row := range g {
			probs = append(probs, probeLimit(row, limits[i], probs)...)
		}
		return httplimit.Rule{}, withSiblings(g, probs)
	}
	if len(g) == 1 && g[0].QuotaPeriod == nil {
		r.Name, r.Rate, r.Burst = RuleName(g[0].RuleID), limits[0].Rate, limits[0].Burst
		return r, nil
	}
	r.Name, r.Limits = GroupName(g[0].RuleID), limits
	return r, nil
}

// keys maps the columns a row's key comes from, scope, key_pattern and
// plan, onto the limit keys and match of its rule, or reports every reason
// they cannot be.
func (m Mapping) keys(row Row) (httplimit.Rule, []*Problem) {
	var probs []*Problem
	bad := func(column, format string, args ...any) {
		probs = append(probs, &Problem{RuleID: row.RuleID, Column: column, Problem: fmt.Sprintf(format, args...)})
	}
	var r httplimit.Rule
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

// limitOf maps the columns of a row's limit onto an httplimit.Limit named
// by RuleName, and reports what httplimit would not: a quota with a rate,
// an anchor on a token bucket, an empty period or zone. The values
// httplimit checks it leaves to httplimit.
func limitOf(row Row) (httplimit.Limit, []*Problem) {
	var probs []*Problem
	bad := func(column, format string, args ...any) {
		probs = append(probs, &Problem{RuleID: row.RuleID, Column: column, Problem: fmt.Sprintf(format, args...)})
	}
	lm := httplimit.Limit{Name: RuleName(row.RuleID)}
	if row.QuotaPeriod == nil {
		lm.Rate, lm.Burst = row.RatePerSecond, float64(row.BurstCapacity)
		for _, c := range quotaColumns(row) {
			if c.set {
				what := "an anchor"
				if c.column == "time_zone" {
					what = "a time zone"
				}
				bad(c.column, "only a calendar quota (quota_period set) has %s: must be NULL, got %s", what, c.value)
			}
		}
		return lm, probs
	}
	if *row.QuotaPeriod == "" {
		bad("quota_period", `must be NULL (a token bucket) or "day", "week", "month" or "year", got ""`)
	}
	if row.RatePerSecond != 0 {
		bad("rate_per_second", "a calendar quota (quota_period %q) has burst_capacity tokens per period and no rate: must be 0, got %v", *row.QuotaPeriod, row.RatePerSecond)
	}
	if row.TimeZone != nil && *row.TimeZone == "" {
		bad("time_zone", `must be NULL (UTC) or an IANA zone name such as "Europe/Berlin", got ""`)
	}
	lm.Quota, lm.Period = float64(row.BurstCapacity), *row.QuotaPeriod
	if row.TimeZone != nil {
		lm.TimeZone = *row.TimeZone
	}
	lm.Anchor = httplimit.Anchor{Month: deref(row.AnchorMonth), Day: deref(row.AnchorDay), Hour: deref(row.AnchorHour)}
	if row.AnchorWeekday != nil {
		lm.Anchor.Weekday = *row.AnchorWeekday
	}
	return lm, probs
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// quotaColumns are a row's columns that only a calendar quota may set.
func quotaColumns(row Row) []struct {
	column, value string
	set           bool
} {
	num := func(p *int) string {
		if p == nil {
			return ""
		}
		return strconv.Itoa(*p)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return strconv.Quote(*p)
	}
	return []struct {
		column, value string
		set           bool
	}{
		{"time_zone", str(row.TimeZone), row.TimeZone != nil},
		{"anchor_month", num(row.AnchorMonth), row.AnchorMonth != nil},
		{"anchor_day", num(row.AnchorDay), row.AnchorDay != nil},
		{"anchor_weekday", str(row.AnchorWeekday), row.AnchorWeekday != nil},
		{"anchor_hour", num(row.AnchorHour), row.AnchorHour != nil},
	}
}

// probeLimit reports httplimit's problems with a row's limit alone, for a
// row that could not be mapped, but for the columns that have one in
// known already.
func probeLimit(row Row, lm httplimit.Limit, known []*Problem) []*Problem {
	probe := httplimit.Rule{Name: "probe", LimitKeys: []string{"ip:address"}, Limits: []httplimit.Limit{lm}}
	switch {
	case row.QuotaPeriod == nil:
		probe.Limits, probe.Rate, probe.Burst = nil, lm.Rate, lm.Burst
	case lm.Period == "":
		// Reported already; a period checks the rest as a quota's.
		probe.Limits[0].Period = "day"
	}
	var ce *httplimit.ConfigError
	var out []*Problem
	if errors.As(httplimit.Validate([]httplimit.Rule{probe}, httplimit.Options{}), &ce) {
		for _, p := range ce.Problems {
			for _, q := range fromField([]Row{row}, p) {
				if !slices.ContainsFunc(known, func(k *Problem) bool { return k.RuleID == q.RuleID && k.Column == q.Column }) {
					out = append(out, q)
				}
			}
		}
	}
	return out
}

// withSiblings adds to probs, the problems of rows of group g, one for
// each other row of g: left out with them, as the rows are one rule.
func withSiblings(g []Row, probs []*Problem) []*Problem {
	var badIDs []string
	for _, row := range g {
		if slices.ContainsFunc(probs, func(p *Problem) bool { return p.RuleID == row.RuleID }) {
			badIDs = append(badIDs, strconv.FormatInt(row.RuleID, 10))
		}
	}
	for _, row := range g {
		if slices.ContainsFunc(probs, func(p *Problem) bool { return p.RuleID == row.RuleID }) {
			continue
		}
		which := "rule " + badIDs[0]
		if len(badIDs) > 1 {
			which = "rules " + strings.Join(badIDs, ", ")
		}
		probs = append(probs, &Problem{RuleID: row.RuleID, Column: "key_pattern",
			Problem: "left out with " + which + ": the rows sharing a scope, key_pattern and plan are one rule, in force all or none"})
	}
	return probs
}

// columns are the table's names for the fields httplimit reports (a
// limit's after its "limits[<i>]." prefix).
var columns = []struct{ field, column string }{
	{"algorithm_config.tokens_per_second", "rate_per_second"},
	{"algorithm_config.burst", "burst_capacity"},
	{"tokens_per_second", "rate_per_second"},
	{"burst", "burst_capacity"},
	{"quota", "burst_capacity"},
	{"period", "quota_period"},
	{"time_zone", "time_zone"},
	{"anchor.month", "anchor_month"},
	{"anchor.day", "anchor_day"},
	{"anchor.weekday", "anchor_weekday"},
	{"anchor.hour", "anchor_hour"},
	{"limit_keys", "key_pattern"},
	{"limits", "key_pattern"}, // too many rows share the key
	{"match.path", "key_pattern"},
	{"match", "plan"}, // the plan's match key, or the rule as a tier
}

var (
	// otherRule is how httplimit names another rule in a message.
	otherRule = regexp.MustCompile(`rule "(?:rule|group)-(\d+)" \(rules\[\d+\]\)`)
	// limitField is the prefix of a field of one limit of a rule.
	limitField = regexp.MustCompile(`^limits\[(\d+)\]\.`)
)

// fromField is httplimit's problem with the rule of rows g (one per limit,
// in order), in the table's words: the problem of one row for a field of
// its limit, else of every row.
func fromField(g []Row, p *httplimit.FieldError) []*Problem {
	field, rows := p.Field, g
	if m := limitField.FindStringSubmatch(field); m != nil {
		field = field[len(m[0]):]
		if j, _ := strconv.Atoi(m[1]); j < len(g) {
			rows = g[j : j+1]
		}
	}
	col := field
	for _, c := range columns {
		if strings.HasPrefix(field, c.field) {
			col = c.column
			break
		}
	}
	msg := otherRule.ReplaceAllString(p.Problem, "rule $1")
	// A row has no insecure_unverified_jwt to set.
	msg = strings.Replace(msg, `, or set "insecure_unverified_jwt": true to accept unverified claims`, ", or read users and plans from other keys", 1)
	if field == "quota" {
		// burst_capacity is an INT.
		msg = strings.Replace(msg, "between 0.001 and 1e9 tokens, a multiple of 0.001,", "between 1 and 1e9 tokens per period,", 1)
	}
	if strings.HasPrefix(col, "anchor_") {
		// An anchor httplimit wants 0 is one the table leaves NULL.
		msg = strings.Replace(msg, "must be 0: ", "must be NULL: ", 1)
	}
	switch m := otherRule.FindStringSubmatch(p.Problem); {
	case p.Field == "match" && m != nil:
		// A tier that can never apply: two rows with the same plan, or an
		// earlier one for every plan, whose keys give the same buckets.
		col = "key_pattern"
		msg = "the rule can never apply: rule " + m[1] + " comes first, keys requests the same way and has the same plan or applies to every plan"
	case p.Field == "limits":
		msg = "the rows sharing a scope, key_pattern and plan are one rule, which " + msg
	}
	out := make([]*Problem, len(rows))
	for i, row := range rows {
		out[i] = &Problem{RuleID: row.RuleID, Column: col, Problem: msg}
	}
	return out
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
