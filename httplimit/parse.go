package httplimit

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseRules reads a rules document, {"rules": [ ... ]}, in the JSON
// vocabulary of the package documentation. It reports every problem at once
// in a *ConfigError: malformed JSON, duplicate keys, unknown fields, wrong
// types, and every check of New (ranges, burst >= rate, duplicate names,
// unknown key kinds, rules that can never apply).
func ParseRules(data []byte) ([]Rule, error) {
	var p problems
	root, err := parseJSON(data, func(path, key string) {
		i, field := ruleField(join(path, key))
		p.add("", i, field, "duplicate key")
	})
	if err != nil {
		p.add("", -1, "", "%v", err)
		return nil, p.err()
	}
	if root.kind != jObject {
		p.add("", -1, "document", "must be an object with a \"rules\" list, got %v", root.kind)
		return nil, p.err()
	}
	var list *jvalue
	for _, m := range root.members {
		if m.name == "rules" {
			list = m.value
		} else {
			p.add("", -1, m.name, `unknown field; the document has only "rules"`)
		}
	}
	if list == nil || list.kind != jArray {
		what := "missing"
		if list != nil {
			what = "got " + list.kind.String()
		}
		p.add("", -1, "rules", "must be a list of rules, %s", what)
		return nil, p.err()
	}
	rules := make([]Rule, len(list.items))
	reported := map[[2]string]bool{} // (index, field) already reported
	for i, item := range list.items {
		d := ruleDecoder{p: &p, index: i, reported: reported}
		d.rule(item, &rules[i])
	}
	var semantic problems
	validate(rules, &semantic)
	for _, e := range semantic.list {
		if !reported[[2]string{itoa(e.Index), e.Field}] && !reported[[2]string{itoa(e.Index), "*"}] {
			p.list = append(p.list, e)
		}
	}
	for _, e := range p.list {
		if e.Rule == "" && e.Index >= 0 && e.Index < len(rules) {
			e.Rule = rules[e.Index].Name // found before the rule was read
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return rules, nil
}

// ruleField splits a document path such as "rules[3].algorithm_config.rps"
// into the rule's index and the field within it; a path outside any rule
// has index -1.
func ruleField(path string) (int, string) {
	rest, ok := strings.CutPrefix(path, "rules[")
	if !ok {
		return -1, path
	}
	n, field, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(n)
	if !ok || err != nil {
		return -1, path
	}
	return i, strings.TrimPrefix(field, ".")
}

// ruleDecoder turns one rule's JSON into a Rule, reporting type problems.
type ruleDecoder struct {
	p        *problems
	index    int
	name     string
	reported map[[2]string]bool
}

func (d *ruleDecoder) bad(field, format string, args ...any) {
	d.reported[[2]string{itoa(d.index), field}] = true
	d.p.add(d.name, d.index, field, format, args...)
}

func (d *ruleDecoder) rule(v *jvalue, r *Rule) {
	if v.kind != jObject {
		d.bad("", "a rule must be an object, got %v", v.kind)
		d.reported[[2]string{itoa(d.index), "*"}] = true
		return
	}
	if n := member(v, "name"); n != nil && n.kind == jString {
		d.name = n.str
	}
	for _, m := range v.members {
		switch m.name {
		case "name":
			r.Name = d.str("name", m.value)
		case "limit_keys":
			r.LimitKeys = d.strs("limit_keys", m.value)
		case "algorithm":
			if s := d.str("algorithm", m.value); s != "token_bucket" && s != "concurrency" && m.value.kind == jString {
				d.bad("algorithm", `must be "token_bucket" or "concurrency" (for a rule with one limit; its limits name their own), got %s`, quote(s))
			}
		case "algorithm_config":
			d.config(m.value, r, member(v, "limits") != nil, concurrency(v))
		case "delay":
			d.delay(m.value, &r.Delay)
		case "adaptive":
			d.adaptive(m.value, &r.Adaptive)
		case "limits":
			r.Limits = d.limits(m.value)
		case "match":
			r.Match = d.match(m.value)
		case "mode":
			r.Mode = d.str("mode", m.value)
		case "fail_mode":
			r.FailMode = d.str("fail_mode", m.value)
		case "insecure_unverified_jwt":
			r.InsecureUnverifiedJWT = d.boolean("insecure_unverified_jwt", m.value)
		default:
			d.bad(m.name, "unknown field; a rule has name, limit_keys, algorithm, algorithm_config, limits, match, mode, fail_mode, insecure_unverified_jwt, delay, adaptive")
		}
	}
	if member(v, "name") == nil {
		d.bad("name", "required: a non-empty string")
	}
	if member(v, "limit_keys") == nil {
		d.bad("limit_keys", "required: a non-empty list such as [\"ip:address\"]")
	}
	if member(v, "algorithm_config") == nil && member(v, "limits") == nil && concurrency(v) {
		d.bad("algorithm_config", "required: an object with max_in_flight")
		d.reported[[2]string{itoa(d.index), "algorithm_config.max_in_flight"}] = true
	} else if member(v, "algorithm_config") == nil && member(v, "limits") == nil {
		d.bad("algorithm_config", "required: an object with tokens_per_second (or rps) and burst, unless the rule has limits")
		d.reported[[2]string{itoa(d.index), "algorithm_config.tokens_per_second"}] = true
		d.reported[[2]string{itoa(d.index), "algorithm_config.burst"}] = true
	}
}

// config reads algorithm_config; with limits, the rate and burst are
// the limits' and not required here.
func (d *ruleDecoder) config(v *jvalue, r *Rule, limits, inflight bool) {
	const pre = "algorithm_config."
	if v.kind != jObject {
		d.bad("algorithm_config", "must be an object, got %v", v.kind)
		d.reported[[2]string{itoa(d.index), pre + "tokens_per_second"}] = true
		d.reported[[2]string{itoa(d.index), pre + "burst"}] = true
		return
	}
	tps, rps := member(v, "tokens_per_second"), member(v, "rps")
	switch mif := member(v, "max_in_flight"); {
	case inflight && mif == nil:
		d.bad(pre+"max_in_flight", "required: the most requests of a key in flight at once")
	case !inflight && mif != nil:
		d.bad(pre+"max_in_flight", `only with "algorithm": "concurrency"`)
	}
	if inflight {
		// validateInFlightRule reports a rate or burst beside it.
		limits = true
	} else if limits {
		// Even a 0, which the Rule could not tell from an absent field.
		for _, f := range []struct {
			name string
			v    *jvalue
			what string
		}{{"tokens_per_second", tps, "rate"}, {"rps", rps, "rate"}, {"burst", member(v, "burst"), "burst"}} {
			if f.v != nil {
				d.bad(pre+f.name, "a rule with limits gives the %s in each of them, not beside them", f.what)
			}
		}
	}
	switch {
	case tps != nil && rps != nil:
		d.bad(pre+"rps", "give tokens_per_second or its alias rps, not both")
		d.reported[[2]string{itoa(d.index), pre + "tokens_per_second"}] = true
	case tps == nil && rps == nil && !limits:
		d.bad(pre+"tokens_per_second", "required: the refill rate in tokens per second (or its alias rps)")
	case rps != nil:
		r.rateField = "rps"
	}
	for _, m := range v.members {
		field := pre + m.name
		switch m.name {
		case "tokens_per_second", "rps":
			if tps == nil || m.name == "tokens_per_second" {
				r.Rate = d.num(field, m.value)
			}
		case "burst":
			r.Burst = d.num(field, m.value)
		case "cost_source":
			r.CostSource = d.str(field, m.value)
		case "fixed_cost":
			r.FixedCost = d.cost(field, m.value)
		case "default_cost":
			r.DefaultCost = d.cost(field, m.value)
		case "min_cost":
			r.MinCost = d.cost(field, m.value)
		case "max_cost":
			r.MaxCost = d.cost(field, m.value)
		case "cost_out_of_range":
			r.CostOutOfRange = d.str(field, m.value)
		case "max_in_flight":
			r.MaxInFlight = d.whole(field, m.value)
		default:
			d.bad(field, "unknown field; algorithm_config has tokens_per_second (or rps), burst, cost_source, fixed_cost, default_cost, min_cost, max_cost, cost_out_of_range, max_in_flight")
		}
	}
	if member(v, "burst") == nil && !limits {
		d.bad(pre+"burst", "required: the bucket capacity in tokens, at least the rate")
	}
}

// concurrency reports whether rule v says it is an in-flight limit.
func concurrency(v *jvalue) bool {
	a := member(v, "algorithm")
	return a != nil && a.kind == jString && a.str == "concurrency"
}

// whole reads max_in_flight: a whole number of requests. One out of
// range is reported here, and read as -1, which validation refuses too
// (0 would read as absent).
func (d *ruleDecoder) whole(field string, v *jvalue) int {
	x := d.num(field, v)
	if math.IsNaN(x) {
		return -1
	}
	if x != math.Trunc(x) || x < 1 || x > maxInFlight {
		d.bad(field, "must be a whole number of requests from 1 to %d, got %v", maxInFlight, x)
		return -1
	}
	return int(x)
}

// duration reads a positive Go duration ("500ms"); 0 if it is not one,
// reported with examples.
func (d *ruleDecoder) duration(field string, v *jvalue, examples string) time.Duration {
	s := d.str(field, v)
	if v.kind != jString {
		return 0
	}
	x, err := time.ParseDuration(s)
	if err != nil || x <= 0 {
		d.bad(field, "must be a span such as %s, got %s", examples, quote(s))
		return 0
	}
	return x
}

// adaptive reads a rule's adaptive rate.
func (d *ruleDecoder) adaptive(v *jvalue, out *Adaptive) {
	if v.kind != jObject {
		d.bad("adaptive", "must be an object with floor and latency_target, got %v", v.kind)
		return
	}
	for _, m := range v.members {
		field := "adaptive." + m.name
		switch m.name {
		case "floor":
			out.Floor = d.num(field, m.value)
		case "latency_target":
			out.LatencyTarget = d.duration(field, m.value, `"200ms"`)
		case "percentile":
			out.Percentile = d.num(field, m.value)
		case "error_rate":
			out.ErrorRate = d.num(field, m.value)
		case "decrease":
			out.Decrease = d.num(field, m.value)
		case "increase":
			out.Increase = d.num(field, m.value)
		default:
			d.bad(field, "unknown field; adaptive has floor, latency_target, percentile, error_rate, decrease, increase")
		}
	}
	for _, f := range []string{"floor", "latency_target"} {
		if member(v, f) == nil {
			d.bad("adaptive."+f, "required")
		}
	}
}

// delay reads a rule's delay: max_delay, a span such as "500ms", and
// queue, in tokens.
func (d *ruleDecoder) delay(v *jvalue, out *Delay) {
	if v.kind != jObject {
		d.bad("delay", "must be an object with max_delay and queue, got %v", v.kind)
		return
	}
	for _, m := range v.members {
		field := "delay." + m.name
		switch m.name {
		case "max_delay":
			out.MaxDelay = d.duration(field, m.value, `"500ms" or "2s"`)
		case "queue":
			out.Queue = d.num(field, m.value)
		default:
			d.bad(field, "unknown field; delay has max_delay and queue")
		}
	}
	if member(v, "max_delay") == nil {
		d.bad("delay.max_delay", `required: the longest a request waits, such as "500ms"`)
	}
}

// limits reads a rule's limits: a list of objects, each a name and a
// token bucket or a calendar quota.
func (d *ruleDecoder) limits(v *jvalue) []Limit {
	if v.kind != jArray {
		d.bad("limits", "must be a list of limits, got %v", v.kind)
		return nil
	}
	if len(v.items) == 0 {
		d.bad("limits", "must hold at least one limit; leave it out for a rule with one")
		return nil
	}
	out := make([]Limit, len(v.items))
	for j, item := range v.items {
		pre := "limits[" + itoa(j) + "]."
		lm := &out[j]
		if item.kind != jObject {
			d.bad("limits["+itoa(j)+"]", "a limit must be an object, got %v", item.kind)
			for _, f := range []string{"name", "tokens_per_second", "burst"} {
				d.reported[[2]string{itoa(d.index), pre + f}] = true
			}
			continue
		}
		quota := member(item, "period") != nil || member(item, "quota") != nil
		window := member(item, "window") != nil
		inflight := member(item, "max_in_flight") != nil
		if a := member(item, "algorithm"); a != nil && a.kind == jString {
			quota, window, inflight = a.str == "calendar_quota", a.str == "strict_window", a.str == "concurrency"
		}
		quota = quota || window || inflight // none has a rate
		tps, rps := member(item, "tokens_per_second"), member(item, "rps")
		switch {
		case tps != nil && rps != nil:
			d.bad(pre+"rps", "give tokens_per_second or its alias rps, not both")
			d.reported[[2]string{itoa(d.index), pre + "tokens_per_second"}] = true
		case tps == nil && rps == nil && !quota:
			d.bad(pre+"tokens_per_second", "required: the refill rate in tokens per second (or its alias rps)")
		case rps != nil:
			lm.rateField = "rps"
		}
		for _, m := range item.members {
			field := pre + m.name
			switch m.name {
			case "name":
				lm.Name = d.str(field, m.value)
			case "algorithm":
				if s := d.str(field, m.value); s != "token_bucket" && s != "calendar_quota" && s != "strict_window" && s != "concurrency" && m.value.kind == jString {
					d.bad(field, `must be "token_bucket", "calendar_quota", "strict_window" or "concurrency", got %s`, quote(s))
				}
			case "max_in_flight":
				lm.MaxInFlight = d.whole(field, m.value)
			case "limit":
				lm.WindowLimit = d.num(field, m.value)
			case "window":
				lm.Window = d.span(field, m.value)
			case "slots":
				if x := d.num(field, m.value); x == math.Trunc(x) && x >= -1e6 && x <= 1e6 {
					lm.Slots = int(x)
				} else if !math.IsNaN(x) {
					d.bad(field, "must be a whole number, got %v", x)
				}
			case "tokens_per_second", "rps":
				if tps == nil || m.name == "tokens_per_second" {
					lm.Rate = d.num(field, m.value)
				}
			case "burst":
				lm.Burst = d.num(field, m.value)
			case "quota":
				lm.Quota = d.num(field, m.value)
			case "period":
				lm.Period = d.str(field, m.value)
			case "time_zone":
				lm.TimeZone = d.str(field, m.value)
			case "anchor":
				d.anchor(field, m.value, &lm.Anchor)
			case "anchor_from":
				d.anchorFrom(field, m.value, &lm.AnchorFrom)
			default:
				d.bad(field, "unknown field; a limit has name, algorithm, and tokens_per_second (or rps) and burst; or quota, period, time_zone, anchor and anchor_from; or limit, window and slots; or max_in_flight")
			}
		}
		if member(item, "name") == nil {
			d.bad(pre+"name", "required: a non-empty string, unique among rules and limits")
		}
		switch {
		case inflight && member(item, "max_in_flight") == nil:
			d.bad(pre+"max_in_flight", "required: the most requests of a key in flight at once")
		case inflight:
		case window && member(item, "limit") == nil:
			d.bad(pre+"limit", "required: the most a key may take in any span of the window")
		case window && member(item, "window") == nil:
			d.bad(pre+"window", `required: a span such as "24h" or "7d"`)
		case window:
		case quota && member(item, "quota") == nil:
			d.bad(pre+"quota", "required: the tokens a key may take in each period")
		case quota && member(item, "period") == nil:
			d.bad(pre+"period", `required: "day", "week", "month" or "year"`)
		case !quota && member(item, "burst") == nil:
			d.bad(pre+"burst", "required: the bucket capacity in tokens, at least the rate")
		}
	}
	return out
}

func (d *ruleDecoder) match(v *jvalue) map[string][]string {
	if v.kind != jObject {
		d.bad("match", "must be an object, got %v", v.kind)
		return nil
	}
	m := map[string][]string{}
	for _, e := range v.members {
		field := "match." + e.name
		switch e.value.kind {
		case jString:
			m[e.name] = []string{e.value.str}
		case jArray:
			m[e.name] = d.strs(field, e.value)
		default:
			d.bad(field, "must be a string or a list of strings, got %v", e.value.kind)
			m[e.name] = []string{""} // keep the key for its own checks
		}
	}
	return m
}

func (d *ruleDecoder) str(field string, v *jvalue) string {
	if v.kind != jString {
		d.bad(field, "must be a string, got %v", v.kind)
		return ""
	}
	return v.str
}

func (d *ruleDecoder) boolean(field string, v *jvalue) bool {
	if v.kind != jBool {
		d.bad(field, "must be true or false, got %v", v.kind)
		return false
	}
	return v.boolean
}

func (d *ruleDecoder) strs(field string, v *jvalue) []string {
	if v.kind != jArray {
		d.bad(field, "must be a list of strings, got %v", v.kind)
		return nil
	}
	out := make([]string, 0, len(v.items))
	for i, item := range v.items {
		if item.kind != jString {
			d.bad(field+"["+itoa(i)+"]", "must be a string, got %v", item.kind)
			continue
		}
		out = append(out, item.str)
	}
	return out
}

func (d *ruleDecoder) num(field string, v *jvalue) float64 {
	if v.kind != jNumber {
		d.bad(field, "must be a number, got %v", v.kind)
		return math.NaN()
	}
	x, err := strconv.ParseFloat(string(v.num), 64)
	if err != nil || !isFinite(x) {
		d.bad(field, "number %s is out of range", v.num)
		return math.NaN()
	}
	return x
}

// cost reads a cost field. 0 stands for "the default" in a Rule, so an
// explicit 0 is reported here, where it can still be told from an absent
// field.
func (d *ruleDecoder) cost(field string, v *jvalue) float64 {
	x := d.num(field, v)
	if x == 0 && v.kind == jNumber {
		d.bad(field, "must be a positive number, got 0")
	}
	return x
}

func member(v *jvalue, name string) *jvalue {
	for _, m := range v.members {
		if m.name == name {
			return m.value
		}
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// anchor reads a calendar quota's anchor.
func (d *ruleDecoder) anchor(field string, v *jvalue, a *Anchor) {
	if v.kind != jObject {
		d.bad(field, "must be an object with month, day, weekday or hour, got %v", v.kind)
		return
	}
	whole := func(f string, v *jvalue) int {
		x := d.num(f, v)
		if x != math.Trunc(x) || math.Abs(x) > 1e6 {
			if !math.IsNaN(x) {
				d.bad(f, "must be a whole number, got %v", x)
			}
			return -1
		}
		return int(x)
	}
	for _, m := range v.members {
		f := field + "." + m.name
		switch m.name {
		case "month":
			if a.Month = whole(f, m.value); a.Month == 0 {
				d.bad(f, "must be between 1 and 12, got 0")
			}
		case "day":
			if a.Day = whole(f, m.value); a.Day == 0 {
				d.bad(f, "must be between 1 and 31, got 0")
			}
		case "hour":
			a.Hour = whole(f, m.value)
		case "weekday":
			a.Weekday = d.str(f, m.value)
		default:
			d.bad(f, "unknown field; an anchor has month, day, weekday, hour")
		}
	}
}

// anchorFrom reads where a calendar quota's per-key anchor comes from.
func (d *ruleDecoder) anchorFrom(field string, v *jvalue, a *AnchorFrom) {
	if v.kind != jObject {
		d.bad(field, "must be an object with day, weekday, hour or time_zone, got %v", v.kind)
		return
	}
	for _, m := range v.members {
		f := field + "." + m.name
		switch m.name {
		case "day":
			a.Day = d.str(f, m.value)
		case "weekday":
			a.Weekday = d.str(f, m.value)
		case "hour":
			a.Hour = d.str(f, m.value)
		case "time_zone":
			a.TimeZone = d.str(f, m.value)
		default:
			d.bad(f, "unknown field; anchor_from has day, weekday, hour, time_zone")
		}
	}
}

// span reads a strict window's span: a Go duration ("90s", "24h", "1h30m")
// or a whole number of days ("7d").
func (d *ruleDecoder) span(field string, v *jvalue) time.Duration {
	s := d.str(field, v)
	if v.kind != jString {
		return 0
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 && n <= 366 {
			return time.Duration(n) * 24 * time.Hour
		}
	} else if x, err := time.ParseDuration(s); err == nil && x > 0 {
		return x
	}
	d.bad(field, `must be a span such as "90s", "24h" or "7d", got %s`, quote(s))
	return -1
}
