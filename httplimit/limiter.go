package httplimit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// HeaderSet selects the rate-limit header fields a Middleware writes.
type HeaderSet uint8

const (
	// HeadersDraft writes RateLimit-Policy and RateLimit of
	// draft-ietf-httpapi-ratelimit-headers-10, one list item per rule that
	// applied, named after the rule. The default.
	HeadersDraft HeaderSet = 1 << iota
	// HeadersLegacy writes RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset (drafts up to -06) for the most constrained rule.
	HeadersLegacy
	// HeadersX writes the same three fields as X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset.
	HeadersX
	// HeadersShadow adds shadow rules to the fields above, and writes the
	// reason header of an allowed request that a shadow rule would have
	// denied. Without it a shadow rule reports only in Stats and OnDeny: a
	// client that honours the fields would otherwise back off for a rule
	// that denies nothing. With no other bit, it means HeadersDraft too.
	HeadersShadow
)

// The shapes of limit besides the token bucket, as Policy.Shape names
// them.
const (
	ShapeCalendarQuota = "calendar_quota"
	ShapeStrictWindow  = "strict_window"
	// ShapeConcurrency is an in-flight limit's: its Burst and Quota are
	// its max_in_flight, Remaining the slots free after the decision.
	ShapeConcurrency = "concurrency"
)

// ReasonHeader names the header that says why a request was denied, or which
// shadow rule would have denied it.
const ReasonHeader = "X-Faucet-Reason"

// Reasons, the values of ReasonHeader and of Result.Reason.
const (
	// ReasonExceeded: a rule's bucket holds fewer tokens than the cost.
	ReasonExceeded = "token_bucket_exceeded"
	// ReasonQuotaExceeded: a calendar quota has fewer tokens left in its
	// period than the cost; Retry-After points at its renewal.
	ReasonQuotaExceeded = "quota_exceeded"
	// ReasonWindowExceeded: a strict window has fewer tokens left in it
	// than the cost; Retry-After points at when enough leaves it.
	ReasonWindowExceeded = "window_exceeded"
	// ReasonInFlightExceeded: an in-flight limit's key has as many
	// requests in flight as it allows; Retry-After estimates when one ends
	// (see In-flight limits in the package documentation).
	ReasonInFlightExceeded = "concurrency_exceeded"
	// ReasonCostExceedsBurst: the cost is above a rule's burst, so the
	// request can never pass; the 429 carries no Retry-After.
	ReasonCostExceedsBurst = "cost_exceeds_burst"
	// ReasonStoreUnavailable: the store failed and a rule that applied has
	// fail_mode "closed" (503).
	ReasonStoreUnavailable = "store_unavailable"
	// ReasonInvalidCost: the cost the client sent is not a plain
	// non-negative decimal, or is outside a rule's min_cost and max_cost
	// and the rule refuses it (400).
	ReasonInvalidCost = "invalid_cost"
	// ReasonInvalidPath: the request's path has no canonical form
	// (CanonicalPath), so no rule can tell which resource it names (400).
	ReasonInvalidPath = "invalid_path"
	// ReasonAmbiguousValue: a header or query parameter that a rule keys,
	// matches or reads a cost from has no single value: it is sent twice,
	// as a list or under another spelling, or the method a rule reads is
	// overridden (400; see Limit keys in the package documentation).
	ReasonAmbiguousValue = "ambiguous_value"
	// ReasonShadowPrefix prefixes the reason a shadow rule would have
	// denied with; the request itself was allowed.
	ReasonShadowPrefix = "shadow_"
)

// Options configures a Middleware; the zero value is usable.
type Options struct {
	// Store keeps the buckets. nil: NewMemoryStore with default options,
	// owned (and closed) by the Middleware.
	Store engine.Store
	// Headers selects the header fields written; 0 means HeadersDraft.
	// Shadow rules are left out of them unless it has HeadersShadow.
	Headers HeaderSet
	// TrustedProxies are the networks of the proxies in front of the
	// limiter. Only when RemoteAddr is in one of them is the forwarding
	// header read; by default it never is, since any client can send it.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the header trusted proxies append the client's
	// address to: "X-Forwarded-For" (the default) or "Forwarded". Only one
	// is read: a proxy that appends to one passes the other through
	// untouched, where a client could have written anything.
	ForwardedHeader string
	// IPv6Prefix is the prefix length that keys IPv6 clients (default 64:
	// one bucket per customer network, since a client often owns a whole
	// /64 and can rotate addresses within it). IPv4Prefix is the same for
	// IPv4 (default 32).
	IPv6Prefix, IPv4Prefix int
	// JitterSeed keys the Retry-After jitter. Instances that share a store
	// should share the seed, so that a client gets one Retry-After from all.
	JitterSeed uint64
	// Now is the clock; nil means time.Now. With a clock of its own and
	// no Store, the Middleware sweeps its default store at this clock
	// every 10 s, not at the real one.
	Now func() time.Time
	// OnStoreError, if set, is called with every error of the store.
	OnStoreError func(error)
	// OnDeny, if set, is called with every request a rule's bucket denies
	// (429), and every one a shadow rule would have denied (Denial.Shadow),
	// on the request's goroutine before its answer: it must not block (hand
	// the Denial to a bounded queue, and drop it when the queue is full).
	// Requests refused for their cost (400) or failed by the store (503)
	// are no bucket's denial and are not reported.
	OnDeny func(Denial)
	// JWT verifies the bearer tokens that jwt: keys and matches read. nil:
	// New and Reload reject such rules unless they set
	// InsecureUnverifiedJWT (see the package documentation).
	JWT JWTVerifier
	// Paths chooses how request paths are made canonical (CanonicalPath)
	// before any rule reads them; a path that cannot be is refused with 400.
	Paths PathOptions
	// MaxDelay bounds the max_delay of every rule in delay mode: from 1ms
	// to 1h; 0 means 30s. A server sets it below its write timeout less
	// the upstream's, so that a request that waited still has the time to
	// be answered.
	MaxDelay time.Duration
	// MaxWaiting bounds the requests that wait at once in delay mode,
	// across every rule and key: one more is denied (ReasonDelayFull).
	// 0 means 4096; at most 1e6. Each waiting request holds its
	// connection: a server keeps it well under its connection cap.
	MaxWaiting int
	// CheckOnly says that the Middleware only decides (Check, the check
	// API), and serves no request itself: it then refuses in-flight limits
	// when rules load, as it could never know when a request ends.
	CheckOnly bool
}

// options is Options with defaults applied.
type options struct {
	store          engine.Store
	headers        HeaderSet
	trustedProxies []netip.Prefix
	forwarded      bool
	ipv6Prefix     int
	ipv4Prefix     int
	seed           uint64
	now            func() time.Time
	onStoreError   func(error)
	onDeny         func(Denial)
	jwt            JWTVerifier
	jwtRejected    jwtCounters
	paths          PathOptions
	invalidPaths   atomic.Uint64 // requests refused for their path
	maxDelay       time.Duration
	maxWaiting     int
	checkOnly      bool
	// sleep waits in delay mode; tests replace it to run on a virtual
	// clock.
	sleep func(context.Context, time.Duration) error
}

func (o Options) resolve() (*options, error) {
	r := &options{store: o.Store, headers: o.Headers, seed: o.JitterSeed, now: o.Now, onStoreError: o.OnStoreError,
		ipv6Prefix: o.IPv6Prefix, ipv4Prefix: o.IPv4Prefix}
	r.jwt = o.JWT
	r.onDeny = o.OnDeny
	r.paths = o.Paths
	r.maxDelay, r.maxWaiting, r.sleep = cmp.Or(o.MaxDelay, defaultMaxDelay), cmp.Or(o.MaxWaiting, defaultMaxWaiting), sleep
	r.checkOnly = o.CheckOnly
	if r.maxDelay < time.Millisecond || r.maxDelay > maxMaxDelay {
		return nil, fmt.Errorf("httplimit: Options.MaxDelay must be from 1ms to 1h, got %v", o.MaxDelay)
	}
	if r.maxWaiting < 1 || r.maxWaiting > 1_000_000 {
		return nil, fmt.Errorf("httplimit: Options.MaxWaiting must be from 1 to 1000000 (0: 4096), got %d", o.MaxWaiting)
	}
	if r.headers&^HeadersShadow == 0 {
		r.headers |= HeadersDraft
	}
	if r.headers&^(HeadersDraft|HeadersLegacy|HeadersX|HeadersShadow) != 0 {
		return nil, fmt.Errorf("httplimit: Options.Headers has unknown bits %#x", uint8(r.headers))
	}
	switch o.ForwardedHeader {
	case "", "X-Forwarded-For", "x-forwarded-for":
	case "Forwarded", "forwarded":
		r.forwarded = true
	default:
		return nil, fmt.Errorf("httplimit: Options.ForwardedHeader must be \"X-Forwarded-For\" or \"Forwarded\", got %q", o.ForwardedHeader)
	}
	if r.ipv6Prefix == 0 {
		r.ipv6Prefix = 64
	}
	if r.ipv4Prefix == 0 {
		r.ipv4Prefix = 32
	}
	if r.ipv6Prefix < 1 || r.ipv6Prefix > 128 {
		return nil, fmt.Errorf("httplimit: Options.IPv6Prefix must be between 1 and 128, got %d", r.ipv6Prefix)
	}
	if r.ipv4Prefix < 1 || r.ipv4Prefix > 32 {
		return nil, fmt.Errorf("httplimit: Options.IPv4Prefix must be between 1 and 32, got %d", r.ipv4Prefix)
	}
	for _, p := range o.TrustedProxies {
		if !p.IsValid() {
			return nil, errors.New("httplimit: Options.TrustedProxies holds an invalid prefix")
		}
		r.trustedProxies = append(r.trustedProxies, p.Masked())
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// Middleware enforces a rule set on HTTP requests. It is safe for concurrent
// use; Reload swaps the rules while requests are being checked.
type Middleware struct {
	opts     *options
	ownStore *engine.Pool // the default store, closed by Close
	// stopSweep and swept start and end the sweeping of the default store
	// at Options.Now, when it is set (nil otherwise).
	stopSweep, swept chan struct{}
	// set is the rule set in force; replaced whole by Reload.
	set atomic.Pointer[ruleSet]
	// values are the header values Handler writes, kept across reloads:
	// each is known by its whole text.
	values *headerValues

	mu       sync.Mutex               // serialises Reload and Close
	counters map[string]*ruleCounters // by rule name, kept across reloads; guarded by mu
	// inflight holds the in-flight counts of each in-flight limit, by
	// limit ID, kept across reloads; guarded by mu.
	inflight map[string]*inFlight
	// adaptive holds the controllers of adaptive rules, by limit ID, kept
	// across reloads; guarded by mu. stopAdapt and adapted stop and end
	// the loop that steps them, started with the first (nil before).
	adaptive           map[string]*ruleAdaptive
	stopAdapt, adapted chan struct{}
	// remoteSlots holds the Slots of in-flight limits on a shared store,
	// by limit ID, bound once and closed by Close; guarded by mu. holders
	// makes the ids of their holds, and renew keeps those alive.
	remoteSlots map[string]*remoteSlots
	holders     *holderIDs
	renewOnce   sync.Once
	renew       *renewer
	closed      bool // guarded by mu

	// waiting counts the requests waiting in delay mode; waitFull those
	// denied because MaxWaiting waited, waitCancelled those whose wait
	// ended with their context.
	waiting                 atomic.Int64
	waitFull, waitCancelled atomic.Uint64
}

// ruleSet is a compiled, immutable rule set.
type ruleSet struct {
	// rules holds every compiled limit: a rule's own, or each of its
	// Limits, in file order.
	rules []*rule
	// groups holds the rules with the same limit keys, in file order: the
	// first limit of each (whose parts are the rule's limits).
	groups [][]*rule
	// source is the rules as validated, defaults filled in.
	source []Rule
	// borrow reports that every rule's Limiter is an *engine.Engine or an
	// *engine.Quota, which copy the key of a bucket they create and keep no
	// other reference to a key once TakeAll returns: Handler then gives it keys that share
	// the bytes of memory later requests reuse. Another Limiter may keep
	// what it is given (as a map key, say), so it gets keys of their own.
	borrow bool
}

// rule is one compiled limit of a Rule: the rule itself, or one of its
// Limits, which has the rule's fields but its own name, rate and burst.
type rule struct {
	Rule
	// limitOf is the name of the rule this is a limit of; "" for a rule
	// with one limit.
	limitOf string
	// period is a calendar quota's ("month"), cal its own calendar and
	// anchorFrom where a key's own anchor is read; period is "" for a
	// token bucket.
	period     string
	cal        engine.Calendar
	anchorFrom anchorSources
	// span and slots are a strict window's; span is 0 for other shapes.
	span  time.Duration
	slots int
	// inflight is an in-flight limit's counts, nil for other shapes; on a
	// shared store, remote keeps them, and inflight is the fallback's.
	inflight *inFlight
	remote   *remoteSlots
	// wait is how long a request may wait for this token bucket's tokens
	// (delay mode), 0 if it may not.
	wait time.Duration
	// adapt is an adaptive rule's controller, nil for others.
	adapt *ruleAdaptive
	// head is the first limit of the rule, whose parts are all of them
	// (itself first): a rule applies, and is taken from, as a whole.
	head     *rule
	parts    []*rule
	spec     engine.Spec
	lim      engine.Limiter
	keys     []keySpec
	match    []matcher
	cost     costSource
	shadow   bool
	closed   bool        // fail_mode closed
	open     bool        // fail_mode open
	policy   string      // the RateLimit-Policy item, precomputed
	quoted   string      // the name as a structured-field string
	denial   *denialBody // the problem body of a denial, precomputed
	counters *ruleCounters
}

// New validates rules (every problem at once, in a *ConfigError), binds them
// to the store and returns a Middleware enforcing them.
func New(rules []Rule, opts Options) (*Middleware, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &Middleware{opts: o, counters: map[string]*ruleCounters{}, inflight: map[string]*inFlight{},
		adaptive: map[string]*ruleAdaptive{}, remoteSlots: map[string]*remoteSlots{}, holders: newHolderIDs(), values: newHeaderValues()}
	if o.store == nil {
		if opts.Now == nil {
			l.ownStore = NewMemoryStore(MemoryOptions{})
		} else {
			// The engines' own sweepers would judge fullness at the real
			// clock, and evict buckets that this clock still sees drained
			// (a clock ahead of the real one would lose every drained
			// bucket to the first sweep): sweep at this clock instead.
			l.ownStore = NewMemoryStore(MemoryOptions{SweepInterval: -1})
			l.stopSweep, l.swept = make(chan struct{}), make(chan struct{})
			go l.sweep(o.now)
		}
		o.store = l.ownStore
	}
	set, err := l.compile(rules)
	if err != nil {
		l.closeStore()
		return nil, err
	}
	l.set.Store(set)
	return l, nil
}

// Reload replaces the rules, all or nothing: on error nothing changes.
// Checks never wait for it; one that runs meanwhile is decided under the old
// rules or the new ones, on buckets that may already have their new rate
// and burst. A rule whose name and limit_keys are unchanged keeps its
// buckets. If its rate or burst changed and its Limiter is an
// engine.Retuner (as NewMemoryStore's are), each bucket keeps the tokens it
// holds at the reload, capped at a smaller burst, and refills at the new rate
// from then on (see engine.Engine.SetAt); with another store the rule starts
// with full buckets. A rule with a new name or other limit_keys starts with full
// buckets. Counters follow the rule's name.
func (l *Middleware) Reload(rules []Rule) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("httplimit: Reload after Close")
	}
	set, err := l.compileLocked(rules)
	if err != nil {
		return err
	}
	old := l.set.Swap(set)
	l.release(old)
	return nil
}

// Close releases the rules' buckets and, for the default store, stops its
// sweeping. Check keeps working with the last rules.
func (l *Middleware) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.release(l.set.Load())
	l.closeRemote()
	return l.closeStore()
}

// closeStore stops the adaptive rates' steps and the default store's
// sweeping, and closes the store.
func (l *Middleware) closeStore() error {
	if l.stopAdapt != nil {
		close(l.stopAdapt)
		<-l.adapted
		l.stopAdapt = nil
	}
	if l.stopSweep != nil {
		close(l.stopSweep)
		<-l.swept
	}
	if l.ownStore != nil {
		return l.ownStore.Close()
	}
	return nil
}

// ownSweepEvery is how often a Middleware with its own clock sweeps its
// default store: the engine's default SweepInterval.
var ownSweepEvery = 10 * time.Second

// sweep sweeps the default store at now until Close.
func (l *Middleware) sweep(now func() time.Time) {
	defer close(l.swept)
	tk := time.NewTicker(ownSweepEvery)
	defer tk.Stop()
	for {
		select {
		case <-l.stopSweep:
			return
		case <-tk.C:
			l.ownStore.SweepAt(now())
		}
	}
}

// Rules returns the rules in force, defaults filled in.
func (l *Middleware) Rules() []Rule {
	set := l.set.Load()
	return cloneRules(set.source)
}

// cloneRules copies rules deep enough that the copy shares nothing a
// caller could change.
func cloneRules(in []Rule) []Rule {
	out := make([]Rule, len(in))
	for i, r := range in {
		out[i] = r
		out[i].LimitKeys = slices.Clone(r.LimitKeys)
		out[i].Limits = slices.Clone(r.Limits)
		if r.Match != nil {
			m := make(map[string][]string, len(r.Match))
			for k, v := range r.Match {
				m[k] = slices.Clone(v)
			}
			out[i].Match = m
		}
	}
	return out
}

func (l *Middleware) release(set *ruleSet) {
	for _, r := range set.rules {
		l.release1(r)
	}
}

// release1 releases the Limiter of one rule, if it has one (an in-flight
// limit has none).
func (l *Middleware) release1(r *rule) {
	if r.lim != nil {
		l.opts.store.Release(r.lim)
	}
}

func (l *Middleware) compile(rules []Rule) (*ruleSet, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.compileLocked(rules)
}

func (l *Middleware) compileLocked(in []Rule) (*ruleSet, error) {
	rules, err := checkRules(in, l.opts)
	if err != nil {
		return nil, err
	}
	set := &ruleSet{borrow: true, source: rules}
	groupIndex := map[string]int{}
	inflight := map[string]*inFlight{}
	ctrls := map[string]*ruleAdaptive{}
	for i := range rules {
		parts := limitsOf(&rules[i])
		for _, r := range parts {
			r.head, r.parts = parts[0], parts
			r.compileParts()
			if r.MaxInFlight > 0 {
				if err := l.inFlightOf(r, inflight); err != nil {
					for _, done := range set.rules {
						l.release1(done)
					}
					return nil, err
				}
				set.rules = append(set.rules, r)
				continue
			}
			r.spec = engine.Spec{ID: limitID(&r.Rule), Name: r.Name, Limit: engine.Limit(r.Rate), Burst: r.Burst}
			if r.Adaptive != (Adaptive{}) {
				if err := l.adaptiveOf(r, ctrls); err != nil {
					for _, done := range set.rules {
						l.release1(done)
					}
					return nil, err
				}
				// Bound at the rate it reached, not at its ceiling.
				r.spec.Limit = engine.Limit(r.adapt.c.Rate())
			}
			switch {
			case r.period != "":
				r.spec = engine.QuotaSpec(r.spec.ID, r.Name, r.Burst, r.cal)
			case r.span != 0:
				r.spec = engine.WindowSpec(r.spec.ID, r.Name, r.Burst, r.span, r.slots)
			}
			lim, err := l.opts.store.Bind(r.spec)
			if err == nil {
				if err = r.delayOn(lim); err != nil {
					l.opts.store.Release(lim)
				}
			}
			if err != nil {
				for _, done := range set.rules {
					l.release1(done)
				}
				if r.limitOf != "" {
					return nil, fmt.Errorf("httplimit: binding limit %q of rule %q: %w", r.Name, r.limitOf, err)
				}
				return nil, fmt.Errorf("httplimit: binding rule %q: %w", r.Name, err)
			}
			r.lim = lim
			switch lim.(type) {
			case *engine.Engine, *engine.Quota, *engine.Window:
			default:
				set.borrow = false
			}
			if r.counters = l.counters[r.Name]; r.counters == nil {
				r.counters = &ruleCounters{}
				l.counters[r.Name] = r.counters
			}
			set.rules = append(set.rules, r)
		}
		g := groupOf(rules[i].LimitKeys)
		gi, ok := groupIndex[g]
		if !ok {
			gi = len(set.groups)
			groupIndex[g] = gi
			set.groups = append(set.groups, nil)
		}
		set.groups[gi] = append(set.groups[gi], parts[0])
	}
	// Every rule is bound, and Bind accepted every limit a Retuner must
	// take: SetAt cannot fail from here on. It changes the buckets of an ID
	// bound with another rate or burst (by the old rules, or by another
	// Middleware on the store), and nothing else.
	now := l.opts.now()
	for _, r := range set.rules {
		if qr, ok := r.lim.(engine.QuotaRetuner); ok && r.period != "" {
			if err := qr.SetQuota(r.Burst, r.cal); err != nil {
				return nil, fmt.Errorf("httplimit: the store bound %q to a quota that refuses its limit: %w", r.Name, err)
			}
			continue
		}
		if wr, ok := r.lim.(windowRetuner); ok && r.span != 0 {
			if err := wr.SetLimitTokens(r.Burst); err != nil {
				return nil, fmt.Errorf("httplimit: the store bound %q to a window that refuses its limit: %w", r.Name, err)
			}
			continue
		}
		rt, ok := r.lim.(engine.Retuner)
		if !ok || rt.Limit() == r.spec.Limit && rt.Burst() == r.spec.Burst {
			continue
		}
		if err := rt.SetAt(now, r.spec.Limit, r.spec.Burst); err != nil {
			return nil, fmt.Errorf("httplimit: the store bound %q to a limiter that refuses its limit: %w", r.Name, err)
		}
	}
	// In-flight limits take their new limits too, and the tables no rule
	// has any more go.
	for _, r := range set.rules {
		if r.inflight != nil {
			r.inflight.max.Store(int64(r.MaxInFlight))
		}
	}
	l.inflight = inflight
	l.adaptive = ctrls
	if len(ctrls) > 0 {
		l.startAdapting()
	}
	return set, nil
}

// Validate reports every problem New would find in rules under opts, in a
// *ConfigError, without binding anything to a store: for a dry run of a
// configuration. A bad Options is a plain error, as from New.
func Validate(rules []Rule, opts Options) error {
	o, err := opts.resolve()
	if err != nil {
		return err
	}
	_, err = checkRules(rules, o)
	return err
}

// checkRules validates a copy of in under o and returns it, defaults
// filled in.
func checkRules(in []Rule, o *options) ([]Rule, error) {
	rules := cloneRules(in)
	for i := range rules {
		if rules[i].Match == nil {
			rules[i].Match = map[string][]string{}
		}
	}
	var p problems
	validate(rules, &p)
	validateJWT(rules, o.jwt != nil, &p)
	validateAnchorHeaders(rules, len(o.trustedProxies) > 0, &p)
	validatePaths(rules, o.paths, &p)
	validateMethods(rules, &p)
	validateHosts(rules, &p)
	validateDelays(rules, o.maxDelay, &p)
	if o.checkOnly {
		validateCheckOnly(rules, &p)
	}
	return rules, p.err()
}

// limitsOf returns the limits a validated rule is decided by: the rule
// itself, or one per Limit, each named after its limit.
func limitsOf(r *Rule) []*rule {
	if len(r.Limits) == 0 {
		u := &rule{Rule: *r}
		if r.MaxInFlight > 0 {
			u.Burst = float64(r.MaxInFlight)
		}
		return []*rule{u}
	}
	parts := make([]*rule, len(r.Limits))
	for j := range r.Limits {
		lm := &r.Limits[j]
		u := &rule{Rule: *r, limitOf: r.Name}
		u.Name, u.Rate, u.Burst, u.rateField, u.Limits = lm.Name, lm.Rate, lm.Burst, lm.rateField, nil
		if lm.isInFlight() {
			u.MaxInFlight, u.Burst = lm.MaxInFlight, float64(lm.MaxInFlight)
		}
		if lm.isWindow() {
			u.span, u.slots = lm.Window, lm.Slots
			u.Burst = lm.WindowLimit
			u.Rate = lm.WindowLimit / lm.Window.Seconds()
		}
		if lm.isQuota() {
			// Validated: the calendar loads.
			u.cal, _ = lm.calendar()
			u.period = lm.Period
			u.Burst = lm.Quota
			u.Rate = lm.Quota / u.cal.Period.Nominal().Seconds()
			u.anchorFrom = newAnchorSources(lm.AnchorFrom)
		}
		parts[j] = u
	}
	return parts
}

// window is RateLimit-Policy's w: the seconds to refill an empty bucket,
// or a quota's nominal period (engine.Period.Nominal).
func (r *rule) window() int64 {
	switch {
	case r.MaxInFlight > 0:
		return 0
	case r.period != "":
		return int64(r.cal.Period.Nominal() / time.Second)
	case r.span != 0:
		return int64((r.span + time.Second - 1) / time.Second)
	}
	return window(r.Rate, r.Burst)
}

// shape is the rule's shape of limit, as Policy.Shape names it.
func (r *rule) shape() string {
	switch {
	case r.MaxInFlight > 0:
		return ShapeConcurrency
	case r.period != "":
		return ShapeCalendarQuota
	case r.span != 0:
		return ShapeStrictWindow
	}
	return ""
}

// ruleName is the name of the rule r belongs to.
func (r *rule) ruleName() string {
	if r.limitOf != "" {
		return r.limitOf
	}
	return r.Name
}

// compileParts parses a validated rule's keys, matches and cost.
func (r *rule) compileParts() {
	for _, k := range r.LimitKeys {
		spec, _ := parseKey(k, false)
		r.keys = append(r.keys, spec)
	}
	// In a canonical order, so that a reload that only reorders limit_keys
	// (same Limit.ID) keeps composing the same bucket keys.
	slices.SortFunc(r.keys, func(a, b keySpec) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		return strings.Compare(a.name, b.name)
	})
	for _, k := range sortedKeys(r.Match) {
		spec, _ := parseKey(k, true)
		r.match = append(r.match, matcher{spec: spec, values: r.Match[k]})
	}
	// Claims last: a request that another entry already rules out needs no
	// token verified.
	claimsLast := func(m matcher) int {
		if m.spec.kind == kindJWT {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(r.match, func(a, b matcher) int { return claimsLast(a) - claimsLast(b) })
	r.cost = newCostSource(&r.Rule)
	r.shadow = r.Mode == ModeShadow
	r.closed = r.FailMode == failClosed
	r.open = r.FailMode == failOpen
	r.quoted = sfString(r.Name)
	r.policy = policyItem(r.quoted, quota(r.Burst), r.window())
	if r.MaxInFlight > 0 {
		r.policy = r.quoted + ";q=" + strconv.Itoa(r.MaxInFlight) + `;qu="concurrent-requests"`
	}
	r.denial = newDenialBody(r.Name, r.limitOf, r.Rate, r.Burst)
	if r.shape() != "" || r.Adaptive != (Adaptive{}) {
		r.denial = nil // written by writeProblemSlow
	}
	if r.Adaptive != (Adaptive{}) {
		r.policy = "" // its w follows the rate: written per request
	}
}

// windowRetuner is a strict window that takes a new limit in place,
// keeping what each key took (engine.Window.SetLimitTokens).
type windowRetuner interface {
	SetLimitTokens(n float64) error
}

// limitID names a rule's buckets (engine.Spec.ID): its name (a limit's, for
// a rule with several) and a hash of its limit_keys. The rate and burst
// stay out: a store keeps the buckets of an ID across a change of them,
// retuned in place or apart (engine.Store). So does a rule that becomes a
// limit of the same name on the same keys.
func limitID(r *Rule) string {
	h := sha256.New()
	g := groupOf(r.LimitKeys)
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(len(g)))
	h.Write(buf[:])
	h.Write([]byte(g))
	return r.Name + "#" + hex.EncodeToString(h.Sum(nil)[:8])
}

// sfString quotes a printable-ASCII name as a structured-field string.
func sfString(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(append(b, '"'))
}
