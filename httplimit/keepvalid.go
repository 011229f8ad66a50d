package httplimit

// KeepValid is Validate for sources whose rules stand alone, such as the
// rows of a table: instead of refusing the whole set it returns the rules
// New would accept under opts, and a *ConfigError with every problem of the
// others (Index is the position in rules), or nil. Each rule is checked on
// its own first; the checks between rules (duplicate names, rules that can
// never apply) then see only the rules that passed, so a bad rule does not
// take a good one down with it. With no rule left the rules are nil. A bad
// Options is a plain error, as from New.
func KeepValid(rules []Rule, opts Options) ([]Rule, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	var all problems
	if len(rules) == 0 {
		all.add("", -1, "rules", "at least one rule is required")
		return nil, all.err()
	}
	bad := make([]bool, len(rules))
	// alone holds each rule as checkRules leaves it (defaults filled), or
	// the zero Rule, which validateAcross passes over, for a bad one.
	alone := make([]Rule, len(rules))
	for i := range rules {
		one, err := checkRules(rules[i:i+1], o)
		if ce, ok := err.(*ConfigError); ok {
			bad[i] = true
			for _, p := range ce.Problems {
				p.Index = i
				all.list = append(all.list, p)
			}
			continue
		}
		alone[i] = one[0]
	}
	var across problems
	validateAcross(alone, &across)
	for _, p := range across.list {
		bad[p.Index] = true
		all.list = append(all.list, p)
	}
	var kept []Rule
	for i, r := range rules {
		if !bad[i] {
			kept = append(kept, r)
		}
	}
	return kept, all.err()
}
