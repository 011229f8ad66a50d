package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Options configures a Server; the zero value picks every default.
type Options struct {
	// Store keeps the buckets; nil keeps them in memory, in a store the
	// Server owns and closes.
	Store engine.Store
	// MaxKeys bounds the live buckets of each limit in the Server's own
	// memory store (engine.Config.MaxKeys; 0: 1,000,000), so that a flood
	// of new descriptor values cannot grow the process without end; keys
	// beyond it share one overflow bucket per limit. Ignored with Store.
	MaxKeys int
	// Headers adds the IETF RateLimit-Policy and RateLimit fields to every
	// answer's response_headers_to_add, and to a denial's the reason
	// (X-Faucet-Reason) and, unless it can never pass, Retry-After.
	Headers bool
	// ShadowHeaders lists shadow_mode descriptors in those fields too. Off,
	// they report in the metrics only: a client that honours the fields
	// would back off for a limit that denies nothing.
	ShadowHeaders bool
	// ShadowMode answers OK to every request while still taking tokens
	// and counting denials (the reference's global shadow mode).
	ShadowMode bool
	// MaxDescriptors bounds a request's descriptors (0: 64), MaxEntries a
	// descriptor's entries (0: 32): a request beyond them is refused with
	// InvalidArgument, naming the bound. A descriptor with an entry whose
	// key plus value exceed MaxEntryBytes (0: 4096) is OVER_LIMIT if it
	// matches a limit, as a limit of 0 would be, never an error: Envoy
	// admits a request the service answers with an error.
	MaxDescriptors, MaxEntries, MaxEntryBytes int
	// MaxOverrides bounds the distinct limits requests may carry in their
	// descriptors' limit field (0: 64): each is a bucket set of its own,
	// per domain. Each configured domain has an equal share of them; a
	// request-carried limit in a domain that is not configured is ignored,
	// as the reference ignores it. One unused for OverrideIdle (0: 10
	// minutes), and at least until its buckets are full again, is unbound;
	// a new one that finds its domain's share taken unbinds the least
	// recently used whose buckets are full, else is OVER_LIMIT.
	MaxOverrides int
	OverrideIdle time.Duration
	// MaxMetricKeys bounds the metric keys that name request values
	// (detailed_metric, value_to_metric, request-carried limits; 0:
	// 10,000): past it, new ones count under their limit's own key.
	MaxMetricKeys int
	// Seed varies the Retry-After jitter between deployments.
	Seed uint64
	// Now is the clock handed to stores that take one (the in-memory
	// engine); nil is time.Now.
	Now func() time.Time
	// OnStoreError, if set, is called with every error of the store: one
	// that wraps engine.ErrFallback was answered from the store's
	// in-memory fallback, any other as Unavailable.
	OnStoreError func(error)
}

func (o Options) resolve() (Options, error) {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxDescriptors", &o.MaxDescriptors, 64}, {"MaxEntries", &o.MaxEntries, 32},
		{"MaxEntryBytes", &o.MaxEntryBytes, 4096}, {"MaxOverrides", &o.MaxOverrides, 64},
		{"MaxMetricKeys", &o.MaxMetricKeys, 10_000}, {"MaxKeys", &o.MaxKeys, 1_000_000},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			return o, fmt.Errorf("envoyrls: Options.%s must be positive, or 0 for %d, got %d", f.name, f.def, *f.v)
		}
	}
	switch {
	case o.OverrideIdle == 0:
		o.OverrideIdle = 10 * time.Minute
	case o.OverrideIdle < 0:
		return o, fmt.Errorf("envoyrls: Options.OverrideIdle must be positive, or 0 for 10m, got %v", o.OverrideIdle)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Server implements envoy.service.ratelimit.v3.RateLimitService over token
// buckets: each matched descriptor is a bucket of requests_per_unit tokens
// refilling requests_per_unit per unit, and a request is admitted only if
// every matched bucket holds its cost, in which case all of them are taken
// from; a denial takes nothing. It is safe for concurrent use.
type Server struct {
	pb.UnimplementedRateLimitServiceServer
	opts  Options
	store engine.Store
	owned *engine.Pool
	stats *stats
	// mu serialises Load, override binds and Close.
	mu    sync.Mutex
	state atomic.Pointer[state]
	// overrides holds the bound request-carried limits; copy on write
	// under mu, read without locks.
	overrides atomic.Pointer[map[overrideKey]*override]
	// lastSweep is when idle overrides were last looked for (Unix ns).
	lastSweep atomic.Int64
	// overridesEvicted and overridesRefused count the overrides unbound
	// to make room for another, and the new ones no room was found for.
	overridesEvicted, overridesRefused atomic.Uint64
}

// state is a loaded configuration with its limits bound.
type state struct {
	cfg  *Config
	lims map[*Limit]engine.Limiter
}

// New returns a Server answering from cfg.
func New(cfg *Config, opts Options) (*Server, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, store: opts.Store, stats: newStats(opts.MaxMetricKeys)}
	if s.store == nil {
		s.owned = engine.NewEnginePool(engine.Config{MaxKeys: opts.MaxKeys})
		s.store = s.owned
	}
	s.overrides.Store(&map[overrideKey]*override{})
	if err := s.Load(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Register registers the server's RateLimitService on g.
func (s *Server) Register(g *grpc.Server) { pb.RegisterRateLimitServiceServer(g, s) }

// Load puts cfg in force. Limits whose place in the tree and values are
// unchanged keep their buckets; in memory, a limit whose values changed
// keeps them too, retuned. If a limit cannot be bound, nothing changes.
func (s *Server) Load(cfg *Config) error {
	if cfg == nil {
		return errors.New("envoyrls: nil Config")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &state{cfg: cfg, lims: map[*Limit]engine.Limiter{}}
	for _, d := range cfg.domains {
		for _, l := range d.limits {
			if !l.Unlimited {
				s.stats.of(d.Name, l.levels, l.levels)
			}
			sp, ok := l.spec()
			if !ok {
				continue
			}
			bound, err := s.store.Bind(sp)
			if err != nil {
				st.release(s.store)
				return fmt.Errorf("envoyrls: %s: limit %s: %w", d.File, l.Path, err)
			}
			st.lims[l] = bound
		}
	}
	// Every limit is bound, and Bind accepted each value a limiter bound
	// before must take: retuning cannot fail from here on. It changes the
	// limiters of the limits whose place stayed and whose values changed.
	now := s.opts.Now()
	for l, lim := range st.lims {
		if err := l.retune(lim, now); err != nil {
			st.release(s.store)
			return fmt.Errorf("envoyrls: limit %s: the store bound a limiter that refuses it: %w", l.Path, err)
		}
	}
	if old := s.state.Swap(st); old != nil {
		old.release(s.store)
	}
	return nil
}

func (st *state) release(store engine.Store) {
	for _, l := range st.lims {
		store.Release(l)
	}
}

// Close releases every limit and closes the in-memory store if the Server
// made it.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.state.Swap(&state{cfg: &Config{}, lims: map[*Limit]engine.Limiter{}}); st != nil {
		st.release(s.store)
	}
	for _, o := range *s.overrides.Swap(&map[overrideKey]*override{}) {
		s.store.Release(o.lim)
	}
	if s.owned != nil {
		return s.owned.Close()
	}
	return nil
}

// maxCost is the largest cost counted: one more than the largest burst
// (requests_per_unit is at most 1e9), so it never passes.
const maxCost = 1e9 + 1

// kind is what a request descriptor matched.
type kind uint8

const (
	kindNone      kind = iota // no limit, or a replaced one: OK
	kindUnlimited             // OK, limit_remaining 2^32-1
	kindZero                  // requests_per_unit 0: always over
	kindBucket                // a bucket to take from
	kindNoRoom                // an override with no room to bind: over
)

// check is one request descriptor's limit and outcome.
type check struct {
	kind    kind
	limit   *Limit // nil for an override
	ovName  string // an override's name
	perUnit uint32
	unit    pb.RateLimitResponse_RateLimit_Unit
	mult    uint32 // of a request-carried limit's unit; 0 or 1 is one unit
	lim     engine.Limiter
	key     string
	shared  []string
	dom     *Domain          // the configured limit's domain, as matched
	cal     *engine.Calendar // a calendar quota's; nil for a bucket
	cost    float64
	shadow  bool
	quota   bool
	d       engine.Decision
	over    bool
}

// ShouldRateLimit decides a request: OK when every matched descriptor's
// bucket holds its cost (all of them are then taken from), OVER_LIMIT
// otherwise, with one status per descriptor.
func (s *Server) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	checks, err := s.checks(req)
	if err != nil {
		return nil, err
	}
	s.maybeSweep()
	denied, err := s.decide(ctx, checks)
	if err != nil {
		return nil, err
	}
	s.renewals(checks)
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(checks))}
	if denied && !s.opts.ShadowMode {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	for i := range checks {
		resp.Statuses[i] = checks[i].status()
		s.count(req.GetDomain(), req.GetDescriptors()[i].GetEntries(), &checks[i])
	}
	if s.opts.Headers {
		resp.ResponseHeadersToAdd = s.headers(checks, resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT)
	}
	return resp, nil
}

// checks validates req and finds each descriptor's limit.
func (s *Server) checks(req *pb.RateLimitRequest) ([]check, error) {
	domain := req.GetDomain()
	descs := req.GetDescriptors()
	switch {
	case domain == "":
		return nil, status.Error(codes.InvalidArgument, "domain: must not be empty")
	case len(descs) == 0:
		return nil, status.Error(codes.InvalidArgument, "descriptors: must not be empty")
	case len(descs) > s.opts.MaxDescriptors:
		return nil, status.Errorf(codes.InvalidArgument, "descriptors: %d, at most %d (Options.MaxDescriptors)", len(descs), s.opts.MaxDescriptors)
	}
	st := s.state.Load()
	dom := st.cfg.domains[domain]
	checks := make([]check, len(descs))
	replaced := map[string]bool{}
	var now time.Time // read once, if an override needs it
	for i, dsc := range descs {
		long, err := s.validate(i, dsc)
		if err != nil {
			return nil, err
		}
		c := &checks[i]
		hits := uint64(max(1, req.GetHitsAddend()))
		if h := dsc.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		// Any cost above the largest burst is denied alike; capped, it
		// cannot wrap the hit counters.
		c.cost = float64(min(hits, maxCost))
		if dom == nil {
			// An unknown domain has no limits, carried ones included, as
			// in the reference; else any caller could bind limits.
			continue
		}
		if ov := dsc.GetLimit(); ov != nil {
			unit := pb.RateLimitResponse_RateLimit_Unit(ov.GetUnit())
			if _, ok := unitSeconds[unit]; !ok {
				return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit.unit: %v is not one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR", i, ov.GetUnit())
			}
			c.perUnit, c.unit = ov.GetRequestsPerUnit(), unit
			if m := ov.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
				c.mult = m.GetValue()
			}
			if c.perUnit == 0 || long {
				c.kind, c.ovName = kindZero, overrideName(c.perUnit, unit, c.mult)
				continue
			}
			if now.IsZero() {
				now = s.opts.Now()
			}
			o, wait, err := s.override(i, overrideKey{domain, c.perUnit, unit, c.mult}, st, now)
			if err != nil {
				return nil, err
			}
			if o == nil {
				c.kind, c.ovName, c.d.RetryAfter = kindNoRoom, overrideName(c.perUnit, unit, c.mult), wait
				continue
			}
			c.kind, c.lim, c.ovName, c.key = kindBucket, o.lim, o.name, bucketKey(domain, dsc.GetEntries(), nil)
			continue
		}
		l, shared := dom.match(dsc.GetEntries())
		if l == nil {
			continue
		}
		for _, r := range l.Replaces {
			replaced[r] = true
		}
		c.limit, c.dom, c.perUnit, c.unit, c.shadow, c.quota, c.cal = l, dom, l.RequestsPerUnit, l.Unit, l.Shadow, l.Quota, l.Calendar
		switch {
		case l.Unlimited:
			c.kind = kindUnlimited
		case l.RequestsPerUnit == 0 || long:
			c.kind = kindZero
		default:
			c.kind, c.lim, c.key, c.shared = kindBucket, st.lims[l], bucketKey(domain, dsc.GetEntries(), shared), shared
		}
	}
	for i := range checks {
		if l := checks[i].limit; l != nil && l.Name != "" && replaced[l.Name] && checks[i].kind != kindUnlimited {
			checks[i] = check{}
		}
	}
	return checks, nil
}

// validate checks one descriptor against the proto's rules and the bounds,
// and reports whether an entry is longer than MaxEntryBytes. Envoy admits
// a request when the service answers an error, and values come from the
// client (a header's, empty or as long as Envoy takes): an empty value is
// a value, and a long one is over any limit it matches, never an error.
func (s *Server) validate(i int, dsc *common.RateLimitDescriptor) (long bool, err error) {
	entries := dsc.GetEntries()
	switch {
	case len(entries) == 0:
		return false, status.Errorf(codes.InvalidArgument, "descriptors[%d].entries: must not be empty", i)
	case len(entries) > s.opts.MaxEntries:
		return false, status.Errorf(codes.InvalidArgument, "descriptors[%d].entries: %d, at most %d (Options.MaxEntries)", i, len(entries), s.opts.MaxEntries)
	}
	for j, e := range entries {
		switch {
		case e.GetKey() == "":
			return false, status.Errorf(codes.InvalidArgument, "descriptors[%d].entries[%d].key: must not be empty", i, j)
		case len(e.GetKey())+len(e.GetValue()) > s.opts.MaxEntryBytes:
			long = true
		}
	}
	return long, nil
}

// decide takes from the matched buckets and reports whether the request
// is denied. Enforced limits are all or nothing; a shadow or quota-mode
// limit that cannot cover its cost is set aside (reported, not taken) and
// the rest are tried again; the request is denied when an enforced limit
// cannot, or when every quota-mode limit is exhausted.
func (s *Server) decide(ctx context.Context, checks []check) (bool, error) {
	var active, looks []int
	quotas, quotasOver, denied := 0, 0, false
	over := func(c *check) {
		switch {
		case c.shadow:
		case c.quota:
			quotasOver++
		default:
			denied = true
		}
	}
	for i := range checks {
		c := &checks[i]
		if c.quota && !c.shadow && (c.kind == kindBucket || c.kind == kindZero) {
			quotas++
		}
		switch {
		case c.kind == kindBucket && c.cost == 0:
			looks = append(looks, i)
		case c.kind == kindBucket:
			active = append(active, i)
		case c.kind == kindZero:
			c.over = true
			c.d.RetryAfter = engine.InfDuration
			over(c)
		case c.kind == kindNoRoom:
			c.over = true
			over(c)
		}
	}
	if len(looks) > 0 {
		// A cost of 0 takes nothing but is over when a cost of 1 would be:
		// else an empty bucket would answer OK to every such request.
		if err := s.peek(ctx, checks, looks); err != nil {
			return false, err
		}
		for _, i := range looks {
			if checks[i].over {
				over(&checks[i])
			}
		}
	}
	var takes []engine.Take
	var out []engine.Decision
	for len(active) > 0 {
		if denied || quotas > 0 && quotasOver == quotas {
			// Nothing more is taken; the rest report their state.
			return true, s.peek(ctx, checks, active)
		}
		takes, out = takes[:0], out[:0]
		for _, i := range active {
			takes = append(takes, engine.Take{Limiter: checks[i].lim, Key: checks[i].key, N: checks[i].cost})
			out = append(out, engine.Decision{})
		}
		k, err := s.takeAll(ctx, takes, out)
		if err != nil {
			return false, err
		}
		if k < 0 {
			for j, i := range active {
				checks[i].d = out[j]
			}
			return false, nil
		}
		c := &checks[active[k]]
		c.d, c.over = out[k], true
		switch {
		case c.shadow:
		case c.quota:
			quotasOver++
		default:
			for j, i := range active {
				if j != k {
					checks[i].d = out[j]
					checks[i].over = out[j].Remaining < checks[i].cost
				}
			}
			return true, nil
		}
		active = append(active[:k], active[k+1:]...)
	}
	return denied || quotas > 0 && quotasOver == quotas, nil
}

// peek reads the active checks' buckets, taking nothing, and records
// whether each could cover its cost (a cost of 0, as if it were 1).
func (s *Server) peek(ctx context.Context, checks []check, active []int) error {
	takes := make([]engine.Take, len(active))
	out := make([]engine.Decision, len(active))
	for j, i := range active {
		takes[j] = engine.Take{Limiter: checks[i].lim, Key: checks[i].key}
	}
	if _, err := s.takeAll(ctx, takes, out); err != nil {
		return err
	}
	for j, i := range active {
		c := &checks[i]
		c.d, c.over = out[j], out[j].Remaining < max(c.cost, 1)
		if c.cost == 0 && c.over {
			c.d.Allowed = false
			if c.cal != nil {
				// A quota's token comes back when it renews.
				c.d.RetryAfter = c.d.ResetAfter
				continue
			}
			// The wait for one token, from the tokens held.
			r := float64(rate(c.perUnit, c.unit, c.mult))
			c.d.RetryAfter = time.Duration(math.Ceil((1 - c.d.Remaining) / r * float64(time.Second)))
		}
	}
	return nil
}

// takeAll makes takes on the store, at the Server's clock if the store
// takes one. A store failure that the store's fallback decided (as every
// redisstore and pgstore Store's does) is answered from it; any other is
// Unavailable, and Envoy's failure_mode_deny then decides.
func (s *Server) takeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	var k int
	var err error
	if at, ok := takes[0].Limiter.(engine.TakerAt); ok {
		k, err = at.TakeAllAt(s.opts.Now(), takes, out)
	} else {
		k, err = takes[0].Limiter.TakeAll(ctx, takes, out)
	}
	if err != nil && s.opts.OnStoreError != nil {
		s.opts.OnStoreError(err)
	}
	if err != nil && !errors.Is(err, engine.ErrFallback) {
		return 0, status.Errorf(codes.Unavailable, "rate limit store: %v", err)
	}
	return k, nil
}

// renewals sets the ResetAfter of every calendar quota's decision to the
// time until the quota renews: a quota with nothing taken in its period
// reports none, and its next period begins by the calendar from now.
func (s *Server) renewals(checks []check) {
	var now time.Time
	for i := range checks {
		c := &checks[i]
		if c.kind != kindBucket || c.cal == nil || c.d.ResetAfter > 0 {
			continue
		}
		if now.IsZero() {
			now = s.opts.Now()
		}
		_, end := c.cal.Bounds(now)
		c.d.ResetAfter = end.Sub(now)
	}
}

// status is the descriptor status of c.
func (c *check) status() *pb.RateLimitResponse_DescriptorStatus {
	switch c.kind {
	case kindNone:
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
	case kindUnlimited:
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
	}
	st := &pb.RateLimitResponse_DescriptorStatus{
		Code:           pb.RateLimitResponse_OK,
		CurrentLimit:   &pb.RateLimitResponse_RateLimit{RequestsPerUnit: c.perUnit, Unit: c.unit},
		LimitRemaining: uint32(min(math.Floor(c.d.Remaining), math.MaxUint32)),
	}
	if c.limit != nil {
		st.CurrentLimit.Name = c.limit.Name
	}
	if c.mult > 1 {
		st.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(c.mult)
	}
	switch {
	case c.over && !c.shadow:
		st.Code = pb.RateLimitResponse_OVER_LIMIT
		switch {
		case c.d.RetryAfter == engine.InfDuration:
		case c.cal != nil:
			// A quota resets when it renews, whatever the cost.
			st.DurationUntilReset = durationpb.New(c.d.ResetAfter)
		default:
			st.DurationUntilReset = durationpb.New(c.d.RetryAfter)
		}
	default:
		st.DurationUntilReset = durationpb.New(c.d.ResetAfter)
	}
	return st
}
