package httplimit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Rule is one rate limit in the rules vocabulary (see the package
// documentation for the JSON form). The zero value of an optional field picks
// its default.
type Rule struct {
	// Name identifies the rule: headers show it as the policy name, metrics
	// as a label. Required; printable ASCII, at most 64 bytes, unique.
	Name string
	// LimitKeys partition the rule's buckets: one bucket per distinct
	// combination of their values. Required. Kinds: "ip:address",
	// "header:<name>", "query:<name>", "path", "method", "jwt:<claim>",
	// "global" (the same value for every request: one bucket for all).
	LimitKeys []string
	// Rate is the refill rate in tokens per second (tokens_per_second, or
	// its alias rps): from 1/31622400 (one token per 366 days) to 1e9.
	// 0 with Limits.
	Rate float64
	// Burst is the bucket capacity in tokens: at least Rate, at most 1e9, a
	// multiple of 0.001. 0 with Limits.
	Burst float64
	// Limits are several limits on the rule's key, decided together: a
	// request takes its cost from every one of them or from none. With
	// Limits, Rate and Burst are 0; at most 8 (maxLimits).
	Limits []Limit
	// CostSource is "fixed" (the default), "header:<name>" or
	// "query:<name>".
	CostSource string
	// FixedCost is the cost with CostSource "fixed"; 0 means 1. Like every
	// cost field, at least 0.001 (the smallest cost the limiter charges), a
	// multiple of 0.001, and at most Burst.
	FixedCost float64
	// DefaultCost is the cost when the cost header or query parameter is
	// absent (a value that is not a plain non-negative decimal is refused);
	// 0 means 1.
	DefaultCost float64
	// MinCost and MaxCost bound the cost a client sends (CostSource
	// "header:<name>" or "query:<name>"; with "fixed" they must be 0).
	// MinCost 0 means DefaultCost, so that a client cannot pay less than a
	// request that says nothing; MaxCost 0 means no bound below the burst
	// (a cost above the burst is then denied, cost_exceeds_burst).
	MinCost, MaxCost float64
	// CostOutOfRange is what a client's cost outside [MinCost, MaxCost]
	// gets: "clamp" (the default) charges the nearer bound, "reject"
	// answers 400 and takes nothing.
	CostOutOfRange string
	// Match restricts the rule to requests whose every entry holds: the key
	// ("jwt:<claim>", "header:<name>", "query:<name>", "method", "path",
	// "path_prefix") has one of the listed values. Empty: every request.
	Match map[string][]string
	// Mode is "enforce" (the default) or "shadow": a shadow rule takes
	// tokens and reports in Stats and Options.OnDeny (in the header fields
	// only with HeadersShadow), but never denies.
	Mode string
	// FailMode is what a store failure does to a request this rule applies
	// to. "fallback" (the default) lets the store's in-memory fallback
	// decide, at the store's share of the limit (a store without one
	// answers 503); "open" admits the request, which lifts the limit while
	// the store is away; "closed" answers 503.
	FailMode string
	// InsecureUnverifiedJWT lets the rule read JWT claims when Options.JWT
	// is nil: they are then decoded WITHOUT verification, and any client can
	// claim any tier or tenant. With a verifier it changes nothing.
	InsecureUnverifiedJWT bool
	// MaxInFlight makes the rule an in-flight limit ("algorithm":
	// "concurrency"): at most so many of a key's requests at once, from 1
	// to 1e6 (maxInFlight). Rate and Burst are then 0, and every request
	// costs one slot, held until its response is finished. The slots are
	// counted in this process, or in the store if it is an
	// engine.SlotStore that other processes share.
	MaxInFlight int
	// Delay, if its MaxDelay is set, holds a request that the rule's token
	// buckets cannot cover now until they can, instead of denying it (see
	// Delay mode in the package documentation).
	Delay Delay
	// Adaptive, if its Floor is set, lets the rule's rate follow the
	// health of the responses it lets through, with Rate as the ceiling.
	Adaptive Adaptive

	// rateField is the JSON spelling the rate came with, for messages.
	rateField string
}

const maxNameLen = 64

// Limit is one of the limits of a rule that has several (Rule.Limits): a
// token bucket on the rule's key (Rate and Burst), or a calendar quota
// (Quota and Period). Its name, not the rule's, is what the RateLimit
// fields, a denial and the metrics call it.
type Limit struct {
	// Name identifies the limit, as Rule.Name a rule: required, printable
	// ASCII, at most 64 bytes, unique among the names of every rule and
	// limit.
	Name string
	// Rate and Burst are a token bucket's, as Rule's; 0 for a quota.
	Rate, Burst float64

	// Quota is a calendar quota's tokens per period: from 0.001 to 1e9, a
	// multiple of 0.001. The whole quota comes back at once, when the next
	// period begins.
	Quota float64
	// Period is a calendar quota's: "day", "week", "month" or "year". A
	// limit with a Period is a quota ("algorithm": "calendar_quota").
	Period string
	// TimeZone is the IANA name of the zone whose calendar the periods
	// follow ("Europe/Berlin"); "" is UTC.
	TimeZone string
	// Anchor is where a period begins in that calendar; the zero value is
	// midnight, Monday, the 1st, January.
	Anchor Anchor
	// AnchorFrom reads a key's own anchor or zone from the request (a
	// customer's billing day, in their time zone), where the client cannot
	// set it.
	AnchorFrom AnchorFrom

	// WindowLimit, Window and Slots make the limit a strict window
	// ("algorithm": "strict_window"): at most WindowLimit tokens (0.001 to
	// 4e6) in any span of Window (1 s to 366 days), counted in Slots parts
	// (1 to 64, 0 is 16; see engine.Window).
	WindowLimit float64
	Window      time.Duration
	Slots       int

	// MaxInFlight makes the limit an in-flight limit ("algorithm":
	// "concurrency"), as Rule.MaxInFlight does.
	MaxInFlight int

	// rateField is the JSON spelling the rate came with, for messages.
	rateField string
}

// Anchor is where the periods of a calendar quota begin.
type Anchor struct {
	// Month is a year's first month, 1 to 12 (0: January).
	Month int
	// Day is a month's or a year's first day, 1 to 31 (0: the 1st). A
	// month without it renews on its last day.
	Day int
	// Weekday is a week's first day: "monday" (the default) to "sunday".
	Weekday string
	// Hour is the hour of the first day a period begins at, 0 to 23.
	Hour int
}

// AnchorFrom names where a key's own anchor is read, each "jwt:<claim>"
// (a verified claim) or "header:<name>" (read only on a request from
// Options.TrustedProxies, which set it; from any other client it is
// ignored). A value that is absent or out of range leaves the limit's own.
// Since the anchor only moves where the next period begins (a period in
// force runs to its end), changing it never gives a key its quota twice.
type AnchorFrom struct {
	// Day is a month's first day, 1 to 31 (a billing day).
	Day string
	// Weekday is a week's first day, 1 (Monday) to 7, or its English name.
	Weekday string
	// Hour is the hour a period begins at, 0 to 23.
	Hour string
	// TimeZone is an IANA zone name.
	TimeZone string
}

// Delay is a rule's delay mode: what its token buckets cannot cover now
// waits in line, per key, in the order it came, until they can.
type Delay struct {
	// MaxDelay is the longest a request waits: from 1ms to
	// Options.MaxDelay. A request that would wait longer is denied.
	MaxDelay time.Duration
	// Queue bounds what a key's waiting requests hold, in tokens of the
	// rule's cost (with a cost of 1, how many requests wait at once): a
	// request that would take the key's waiting tokens past it is denied.
	// From 0.001 to 1e9; 0 means as many as MaxDelay lets in, MaxDelay
	// times the rate.
	Queue float64
}

// maxInFlight is the largest MaxInFlight.
const maxInFlight = 1_000_000

// isInFlight reports whether the limit is an in-flight limit.
func (lm *Limit) isInFlight() bool { return lm.MaxInFlight != 0 }

// isQuota reports whether the limit is a calendar quota.
func (lm *Limit) isQuota() bool { return lm.Period != "" || lm.Quota != 0 }

// isWindow reports whether the limit is a strict window.
func (lm *Limit) isWindow() bool { return lm.Window != 0 || lm.WindowLimit != 0 || lm.Slots != 0 }

// maxLimits is the most limits one rule can have.
const maxLimits = 8

// The modes of a rule, and of a Policy.
const (
	// ModeEnforce denies the requests the rule's bucket cannot cover.
	ModeEnforce = "enforce"
	// ModeShadow only reports them.
	ModeShadow = "shadow"
)

const (
	failFallback = "fallback"
	failOpen     = "open"
	failClosed   = "closed"
	costClamp    = "clamp"
	costReject   = "reject"
)

// keyKind is the kind of a limit key or of a match entry.
type keyKind int

const (
	kindIP keyKind = iota
	kindHeader
	kindQuery
	kindPath
	kindMethod
	kindJWT
	kindPathPrefix // match only
	// kindGlobal comes last: kinds are hashed into Spec.ID (limitID), so
	// renumbering one would give its rules new buckets.
	kindGlobal // limit key only
)

// keySpec is one parsed limit key or match key.
type keySpec struct {
	kind keyKind
	name string // header (canonical), query parameter or claim name
}

// parseKey parses a limit key (match false) or a match key (match true) and
// returns a problem description when it is invalid.
func parseKey(s string, match bool) (keySpec, string) {
	kind, name, hasName := strings.Cut(s, ":")
	switch {
	case !match && s == "ip:address":
		return keySpec{kind: kindIP}, ""
	case !match && s == "global":
		return keySpec{kind: kindGlobal}, ""
	case s == "path":
		return keySpec{kind: kindPath}, ""
	case s == "method":
		return keySpec{kind: kindMethod}, ""
	case match && s == "path_prefix":
		return keySpec{kind: kindPathPrefix}, ""
	case hasName && kind == "header":
		if !isToken(name) {
			return keySpec{}, "header name must be a non-empty HTTP token (letters, digits and !#$%&'*+-.^_`|~), got " + quote(name)
		}
		return keySpec{kind: kindHeader, name: textproto.CanonicalMIMEHeaderKey(name)}, ""
	case hasName && kind == "query":
		if name == "" {
			return keySpec{}, "query parameter name must not be empty"
		}
		return keySpec{kind: kindQuery, name: name}, ""
	case hasName && kind == "jwt":
		if name == "" {
			return keySpec{}, "JWT claim name must not be empty"
		}
		return keySpec{kind: kindJWT, name: name}, ""
	}
	if match {
		return keySpec{}, "unknown match key " + quote(s) + `; allowed: "jwt:<claim>", "header:<name>", "query:<name>", "method", "path", "path_prefix"`
	}
	return keySpec{}, "unknown limit key " + quote(s) + `; allowed: "ip:address", "header:<name>", "query:<name>", "path", "method", "jwt:<claim>", "global"`
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// minCost is the smallest cost but 0: one quantum.
const minCost = 1.0 / fixedpoint.QuantaPerToken

// validate checks rules and reports every problem; it also fills defaults in
// place, so rules must be the caller's own copy.
func validate(rules []Rule, p *problems) {
	if len(rules) == 0 {
		p.add("", -1, "rules", "at least one rule is required")
		return
	}
	for i := range rules {
		validateRule(&rules[i], i, p)
	}
	validateAcross(rules, p)
}

// validateAcross runs the checks that compare rules with each other:
// duplicate names and rules that can never apply. Rules without a name, or
// without valid limit_keys, take no part.
func validateAcross(rules []Rule, p *problems) {
	// Rules and limits share one namespace: each name is a RateLimit
	// item, a metrics label and a store's bucket ID.
	type owner struct{ rule, limit int }
	names := map[string]owner{}
	where := func(o owner) string {
		if o.limit < 0 {
			return "rules[" + itoa(o.rule) + "]"
		}
		return "rules[" + itoa(o.rule) + "].limits[" + itoa(o.limit) + "]"
	}
	claim := func(name string, o owner, field string) {
		if name == "" {
			return
		}
		if prev, dup := names[name]; dup {
			p.add(rules[o.rule].Name, o.rule, field, "duplicate name: %s has it too", where(prev))
			return
		}
		names[name] = o
	}
	for i := range rules {
		claim(rules[i].Name, owner{i, -1}, "name")
		for j := range rules[i].Limits {
			claim(rules[i].Limits[j].Name, owner{i, j}, "limits["+itoa(j)+"].name")
		}
	}
	validateGroups(rules, p)
}

func validateRule(r *Rule, i int, p *problems) {
	bad := func(field, format string, args ...any) { p.add(r.Name, i, field, format, args...) }
	validateName(r.Name, bad)
	validateLimitKeys(r.LimitKeys, bad)
	costCap, capOK := validateLimits(r, bad)
	validateAdaptive(r, bad)
	validateCostSource(r, bad)
	validateCosts(r, costCap, capOK, bad)
	validateMatch(r.Match, bad)
	oneOf(&r.Mode, "mode", bad, ModeEnforce, ModeShadow)
	oneOf(&r.FailMode, "fail_mode", bad, failFallback, failOpen, failClosed)
}

// badFunc reports one problem with a rule's field.
type badFunc = func(field, format string, args ...any)

func validateName(name string, bad badFunc) {
	switch {
	case name == "":
		bad("name", "required: a non-empty string")
	case len(name) > maxNameLen:
		bad("name", "must be at most %d bytes, got %d", maxNameLen, len(name))
	case strings.IndexFunc(name, func(c rune) bool { return c < 0x20 || c > 0x7e }) >= 0:
		bad("name", "must be printable ASCII (it becomes a header value)")
	}
}

func validateLimitKeys(keys []string, bad badFunc) {
	if len(keys) == 0 {
		bad("limit_keys", "required: a non-empty list such as [\"ip:address\"]")
	}
	seen := map[keySpec]bool{}
	for j, k := range keys {
		spec, msg := parseKey(k, false)
		field := "limit_keys[" + itoa(j) + "]"
		if msg != "" {
			bad(field, "%s", msg)
		} else if seen[spec] {
			bad(field, "duplicate limit key %s", quote(k))
		}
		seen[spec] = true
	}
}

// validateLimits checks the rule's limit, or each of its Limits, and
// returns the largest cost every limit can pass (the smallest burst), and
// whether every burst is valid, so that it means something.
func validateLimits(r *Rule, bad badFunc) (costCap float64, ok bool) {
	if r.MaxInFlight != 0 {
		validateInFlightRule(r, bad)
		return math.Inf(1), false
	}
	if len(r.Limits) == 0 {
		return r.Burst, validateLimit(r.Rate, r.Burst, r.rateField, "algorithm_config.", r.Delay.MaxDelay != 0, bad)
	}
	if r.Rate != 0 || r.rateField != "" {
		bad("algorithm_config."+cmp.Or(r.rateField, "tokens_per_second"), "a rule with limits gives the rate in each of them, not beside them")
	}
	if r.Burst != 0 {
		bad("algorithm_config.burst", "a rule with limits gives the burst in each of them, not beside them")
	}
	if len(r.Limits) > maxLimits {
		bad("limits", "must hold at most %d limits, got %d", maxLimits, len(r.Limits))
	}
	ok = true
	costCap = math.Inf(1)
	for j := range r.Limits {
		lm := &r.Limits[j]
		pre := "limits[" + itoa(j) + "]."
		validateName(lm.Name, func(field, format string, args ...any) { bad(pre+field, format, args...) })
		switch {
		case lm.isInFlight():
			validateInFlight(lm.MaxInFlight, pre+"max_in_flight", bad)
			if r.Mode == ModeShadow {
				bad(pre+"max_in_flight", "a shadow rule's several limits are rate limits: give an in-flight limit in shadow mode a rule of its own")
			}
			if lm.Rate != 0 || lm.rateField != "" || lm.Burst != 0 || lm.isQuota() || lm.isWindow() {
				bad(pre+"max_in_flight", "an in-flight limit has max_in_flight alone: no rate, burst, quota or window")
				ok = false
			}
			continue
		case lm.isQuota() && lm.isWindow():
			bad(pre+"window", "a limit is a calendar quota (quota, period) or a strict window (limit, window), not both")
			ok = false
			continue
		case lm.isQuota():
			if !validateQuota(lm, pre, bad) {
				ok = false
			}
			costCap = min(costCap, lm.Quota)
			continue
		case lm.isWindow():
			if !validateWindow(lm, pre, bad) {
				ok = false
			}
			costCap = min(costCap, lm.WindowLimit)
			continue
		}
		if !validateLimit(lm.Rate, lm.Burst, lm.rateField, pre, r.Delay.MaxDelay != 0, bad) {
			ok = false
		}
		costCap = min(costCap, lm.Burst)
	}
	return costCap, ok
}

// maxQuota is the largest quota of a calendar quota.
const maxQuota = 1e9

// validateQuota checks a calendar quota's fields, and reports whether its
// quota is valid.
func validateQuota(lm *Limit, pre string, bad badFunc) (quotaOK bool) {
	if lm.Rate != 0 || lm.rateField != "" {
		bad(pre+cmp.Or(lm.rateField, "tokens_per_second"), "a calendar quota has quota and period, not a rate")
	}
	if lm.Burst != 0 {
		bad(pre+"burst", "a calendar quota has quota and period, not a burst")
	}
	_, exact := fixedpoint.QuantizeExact(lm.Quota)
	quotaOK = isFinite(lm.Quota) && lm.Quota >= minCost && lm.Quota <= maxQuota && exact
	if !quotaOK {
		bad(pre+"quota", "must be between 0.001 and 1e9 tokens, a multiple of 0.001, got %v", lm.Quota)
	}
	if _, err := lm.calendar(); err != nil {
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			for _, le := range engine.LimitErrors(e) {
				bad(pre+calendarField[le.Field], "must %s, got %s", le.Must, le.Got)
			}
			if len(engine.LimitErrors(e)) == 0 {
				bad(pre+"time_zone", "%v", e)
			}
		}
	}
	for _, src := range anchorFields(&lm.AnchorFrom) {
		if src.v == "" {
			continue
		}
		field := pre + "anchor_from." + src.field
		spec, msg := parseKey(src.v, false)
		switch {
		case msg != "":
			bad(field, `must be "jwt:<claim>" or "header:<name>", got %s`, quote(src.v))
		case spec.kind != kindJWT && spec.kind != kindHeader:
			bad(field, `must be "jwt:<claim>" or "header:<name>" (a value the client cannot set), got %s`, quote(src.v))
		}
	}
	switch p, _ := engine.ParsePeriod(lm.Period); {
	case lm.AnchorFrom.Day != "" && p != engine.Monthly:
		bad(pre+"anchor_from.day", `only a "month" period has a day of the month to read`)
	case lm.AnchorFrom.Weekday != "" && p != engine.Weekly:
		bad(pre+"anchor_from.weekday", `only a "week" period has a weekday to read`)
	}
	return quotaOK
}

// validateWindow checks a strict window's fields, and reports whether its
// limit is valid.
func validateWindow(lm *Limit, pre string, bad badFunc) (limitOK bool) {
	if lm.Rate != 0 || lm.rateField != "" {
		bad(pre+cmp.Or(lm.rateField, "tokens_per_second"), "a strict window has limit and window, not a rate")
	}
	if lm.Burst != 0 {
		bad(pre+"burst", "a strict window has limit and window, not a burst")
	}
	limitOK = true
	for _, le := range engine.LimitErrors(engine.CheckWindow(lm.WindowLimit, lm.Window, lm.Slots)) {
		field := map[string]string{"Limit": "limit", "Window": "window", "Slots": "slots"}[le.Field]
		if field == "limit" {
			limitOK = false
		}
		bad(pre+field, "must %s, got %s", le.Must, le.Got)
	}
	return limitOK
}

// calendarField is the rules' name of each engine.Calendar field.
var calendarField = map[string]string{"Period": "period", "Month": "anchor.month", "Day": "anchor.day",
	"Weekday": "anchor.weekday", "Hour": "anchor.hour"}

// weekdays are the names of Anchor.Weekday, Monday first.
var weekdays = [...]string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

// calendar is the limit's own calendar, or every problem with it: each a
// *engine.LimitError, or the error of an unknown zone.
func (lm *Limit) calendar() (engine.Calendar, error) {
	var errs []error
	p, err := engine.ParsePeriod(lm.Period)
	if err != nil {
		errs = append(errs, &engine.LimitError{Field: "Period", Must: `be "day", "week", "month" or "year"`, Got: quote(lm.Period)})
	}
	c := engine.Calendar{Period: p, Month: time.Month(lm.Anchor.Month), Day: lm.Anchor.Day, Hour: lm.Anchor.Hour}
	if lm.Anchor.Weekday != "" {
		i := slices.Index(weekdays[:], strings.ToLower(lm.Anchor.Weekday))
		if i < 0 {
			errs = append(errs, &engine.LimitError{Field: "Weekday", Must: `be "monday" to "sunday"`, Got: quote(lm.Anchor.Weekday)})
		} else {
			c.Weekday = i + 1
		}
	}
	if lm.TimeZone != "" {
		loc, err := loadZone(lm.TimeZone)
		if err != nil {
			errs = append(errs, fmt.Errorf(`must be an IANA zone name such as "Europe/Berlin", got %s`, quote(lm.TimeZone)))
		}
		c.Location = loc
	}
	if err == nil {
		if cerr := c.Check(); cerr != nil {
			errs = append(errs, cerr)
		}
	}
	return c, errors.Join(errs...)
}

// validateLimit checks a rate and burst against the engine's domain, with
// the rules' names for their fields (after prefix), and reports whether
// the burst is valid. A burst below the rate is refused, unless the rule
// smooths (delay): a client of a bucket that holds less than a second's
// worth would be denied within every second it stays at the rate, while a
// smoothed request waits instead.
func validateLimit(rate, burst float64, rateField, prefix string, smooth bool, bad badFunc) (burstOK bool) {
	rf := prefix + cmp.Or(rateField, "tokens_per_second")
	rateOK := true
	burstOK = true
	for _, le := range engine.LimitErrors(engine.CheckLimit(engine.Limit(rate), burst)) {
		switch le.Field {
		case "Limit":
			rateOK = false
			bad(rf, "must %s, got %s", le.Must, le.Got)
		case "Burst":
			burstOK = false
			bad(prefix+"burst", "must %s, got %s", le.Must, le.Got)
		default:
			bad(prefix+"burst", "burst/rate must %s, got %s", le.Must, le.Got)
		}
	}
	if rateOK && burstOK && burst < rate && !smooth {
		bad(prefix+"burst", "must be at least the rate (%v), got %v", rate, burst)
	}
	return burstOK
}

// validateCostSource checks cost_source and fills its default, "fixed".
func validateCostSource(r *Rule, bad badFunc) {
	switch cs := r.CostSource; {
	case cs == "" || cs == "fixed":
		r.CostSource = "fixed"
	case strings.HasPrefix(cs, "header:"):
		if name := cs[len("header:"):]; !isToken(name) {
			bad("algorithm_config.cost_source", "header name must be a non-empty HTTP token, got %s", quote(name))
		}
	case strings.HasPrefix(cs, "query:"):
		if cs == "query:" {
			bad("algorithm_config.cost_source", "query parameter name must not be empty")
		}
	default:
		bad("algorithm_config.cost_source", `must be "fixed", "header:<name>" or "query:<name>", got %s`, quote(cs))
	}
}

func validateMatch(match map[string][]string, bad badFunc) {
	for _, k := range sortedKeys(match) {
		field := "match." + k
		spec, msg := parseKey(k, true)
		if msg != "" {
			bad("match", "%s", msg)
			continue
		}
		vals := match[k]
		if len(vals) == 0 {
			bad(field, "must list at least one value")
		}
		if spec.kind == kindPath || spec.kind == kindPathPrefix {
			for _, v := range vals {
				if !strings.HasPrefix(v, "/") {
					bad(field, "must start with \"/\", got %s", quote(v))
				}
			}
		}
	}
}

// validateCosts checks the cost fields and fills their defaults: 1 for
// fixed_cost and default_cost, default_cost for min_cost.
// Every cost must be at most costCap, the smallest burst of the rule's
// limits, when capOK.
func validateCosts(r *Rule, costCap float64, capOK bool, bad badFunc) {
	const pre = "algorithm_config."
	// check reports whether v is a cost the limiter can charge as written.
	check := func(field string, v float64) bool {
		_, exact := fixedpoint.QuantizeExact(v)
		switch {
		case !isFinite(v) || v <= 0:
			bad(pre+field, "must be a positive number, got %v", v)
		case v < minCost:
			bad(pre+field, "must be at least 0.001 tokens, the smallest cost the limiter charges, got %v", v)
		case !exact:
			bad(pre+field, "must be a multiple of 0.001 tokens, got %v", v)
		case capOK && v > costCap:
			what := "the burst"
			if len(r.Limits) > 0 {
				what = "the smallest burst of the limits"
			}
			bad(pre+field, "must be at most %s (%v), or no request could ever pass; got %v", what, costCap, v)
		default:
			return true
		}
		return false
	}
	if r.FixedCost == 0 {
		r.FixedCost = 1
	}
	if r.DefaultCost == 0 {
		r.DefaultCost = 1
	}
	check("fixed_cost", r.FixedCost)
	defOK := check("default_cost", r.DefaultCost)
	if r.CostSource == "fixed" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"min_cost", r.MinCost != 0}, {"max_cost", r.MaxCost != 0}, {"cost_out_of_range", r.CostOutOfRange != ""}} {
			if f.set {
				bad(pre+f.name, `bounds a cost the client sends: only with cost_source "header:<name>" or "query:<name>"`)
			}
		}
		return
	}
	oneOf(&r.CostOutOfRange, pre+"cost_out_of_range", bad, costClamp, costReject)
	minSet := r.MinCost != 0
	if !minSet {
		r.MinCost = r.DefaultCost
	}
	minOK := check("min_cost", r.MinCost)
	maxOK := r.MaxCost == 0 || check("max_cost", r.MaxCost)
	switch {
	case !minOK || !maxOK || !defOK:
	case r.MaxCost != 0 && r.MinCost > r.MaxCost:
		bad(pre+"max_cost", "must be at least min_cost (%v), got %v", r.MinCost, r.MaxCost)
	case minSet && r.DefaultCost < r.MinCost:
		bad(pre+"default_cost", "must be at least min_cost (%v), got %v", r.MinCost, r.DefaultCost)
	case r.MaxCost != 0 && r.DefaultCost > r.MaxCost:
		bad(pre+"default_cost", "must be at most max_cost (%v), got %v", r.MaxCost, r.DefaultCost)
	}
}

// oneOf checks an enumerated field with two values, the first the default.
func oneOf(v *string, field string, bad badFunc, def string, others ...string) {
	if *v == "" {
		*v = def
	}
	all := append([]string{def}, others...)
	if slices.Contains(all, *v) {
		return
	}
	quoted := make([]string, len(all))
	for i, a := range all {
		quoted[i] = quote(a)
	}
	bad(field, "must be %s or %s, got %s", strings.Join(quoted[:len(all)-1], ", "), quoted[len(all)-1], quote(*v))
}

// validateGroups reports rules that can never apply: among rules with the
// same limit keys the first whose match holds applies, so a rule after one
// without match, or after one with an identical match, is dead.
func validateGroups(rules []Rule, p *problems) {
	type prev struct {
		name  string
		index int
		match string
	}
	byGroup := map[string][]prev{}
	for i, r := range rules {
		if !validKeys(r.LimitKeys) {
			continue // reported already; its group is unknown
		}
		g := groupOf(r.LimitKeys)
		m := canonicalMatch(r.Match)
		for _, q := range byGroup[g] {
			if q.match == "" || q.match == m {
				why := "has no match"
				if q.match != "" {
					why = "has the same match"
				}
				p.add(r.Name, i, "match", "the rule can never apply: rule %q (rules[%d]) has the same limit_keys, comes first and %s", q.name, q.index, why)
				break
			}
		}
		byGroup[g] = append(byGroup[g], prev{r.Name, i, m})
	}
}

func validKeys(keys []string) bool {
	for _, k := range keys {
		if _, msg := parseKey(k, false); msg != "" {
			return false
		}
	}
	return len(keys) > 0
}

// groupOf is the identity of a rule's limit keys: the set, in any order.
func groupOf(keys []string) string {
	specs := make([]string, 0, len(keys))
	for _, k := range keys {
		spec, msg := parseKey(k, false)
		if msg != "" {
			specs = append(specs, "?"+k)
			continue
		}
		specs = append(specs, itoa(int(spec.kind))+":"+spec.name)
	}
	slices.Sort(specs)
	return strings.Join(specs, "\x00")
}

func canonicalMatch(m map[string][]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		spec, _ := parseKey(k, true)
		vals := slices.Clone(m[k])
		slices.Sort(vals)
		b.WriteString(itoa(int(spec.kind)) + ":" + spec.name + "=" + strings.Join(vals, "\x01") + "\x00")
	}
	return b.String()
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
