package envoyrls

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
)

// unitSeconds is each unit's length, as the reference counts it (a month
// is 30 days, a year 365).
var unitSeconds = map[pb.RateLimitResponse_RateLimit_Unit]int64{
	pb.RateLimitResponse_RateLimit_SECOND: 1,
	pb.RateLimitResponse_RateLimit_MINUTE: 60,
	pb.RateLimitResponse_RateLimit_HOUR:   3600,
	pb.RateLimitResponse_RateLimit_DAY:    86400,
	pb.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
	pb.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
	pb.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
}

// rate is the refill rate of a bucket of perUnit tokens every mult units
// (mult 0 is 1): the rolling equivalent of a fixed window of perUnit
// requests.
func rate(perUnit uint32, unit pb.RateLimitResponse_RateLimit_Unit, mult uint32) engine.Limit {
	return engine.Limit(float64(perUnit) / (float64(unitSeconds[unit]) * float64(max(1, mult))))
}

// spec is the store Spec of a configured limit, or ok false for a limit
// with no bucket (unlimited, or 0 requests: every request is denied). A
// limit with a calendar is a calendar quota.
func (l *Limit) spec() (s engine.Spec, ok bool) {
	if l.Unlimited || l.RequestsPerUnit == 0 {
		return s, false
	}
	if l.Calendar != nil {
		return engine.QuotaSpec(l.id, l.Path, float64(l.RequestsPerUnit), *l.Calendar), true
	}
	return engine.Spec{ID: l.id, Name: l.Path, Limit: rate(l.RequestsPerUnit, l.Unit, 1), Burst: float64(l.RequestsPerUnit)}, true
}

// retune gives lim, bound for l, l's values if it is a limiter that keeps
// its buckets across a change (engine.Retuner) and has others: the store
// returned the limiter an earlier configuration bound for l's place. A
// calendar quota takes l's quota and calendar (engine.Quota.SetQuota),
// keeping what each key took.
func (l *Limit) retune(lim engine.Limiter, now time.Time) error {
	sp, _ := l.spec()
	if l.Calendar != nil {
		if q, ok := lim.(quotaRetuner); ok {
			return q.SetQuota(sp.Burst, *l.Calendar)
		}
		return nil
	}
	rt, ok := lim.(engine.Retuner)
	if !ok || rt.Limit() == sp.Limit && rt.Burst() == sp.Burst {
		return nil
	}
	return rt.SetAt(now, sp.Limit, sp.Burst)
}

// quotaRetuner is a calendar quota that takes a new quota and calendar in
// place (engine.Quota.SetQuota).
type quotaRetuner interface {
	SetQuota(n float64, cal engine.Calendar) error
}

// limitID names a configured limit's buckets: a hash of its domain and
// its path's composite keys, so that a reload keeps the buckets of every
// limit still at the same place, and two places never share buckets
// (the dotted Path is ambiguous when keys hold dots). A calendar quota's
// name is apart from a bucket's, so that no store reads the state of one
// shape as the other's when a limit changes shape.
func limitID(domain string, composites []string, quota bool) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range append([]string{domain}, composites...) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	prefix := "rls-"
	if quota {
		prefix = "rls-quota-"
	}
	return prefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// overrideSpec is the Spec of a limit a request carries, perUnit every
// mult units: apart from every configured limit's buckets, and shared by
// every request with the same override.
func overrideSpec(perUnit uint32, unit pb.RateLimitResponse_RateLimit_Unit, mult uint32) engine.Spec {
	id := overrideName(perUnit, unit, mult)
	return engine.Spec{ID: id, Name: id, Limit: rate(perUnit, unit, mult), Burst: float64(perUnit)}
}

// overrideName names a request-carried limit's bucket set, and the limit
// in headers and metrics.
func overrideName(perUnit uint32, unit pb.RateLimitResponse_RateLimit_Unit, mult uint32) string {
	if mult > 1 {
		return fmt.Sprintf("rls-override-%d-per-%d-%s", perUnit, mult, unit)
	}
	return fmt.Sprintf("rls-override-%d-per-%s", perUnit, unit)
}

// checkLimit checks that a bucket can hold a limit of perUnit every mult
// units.
func checkLimit(perUnit uint32, unit pb.RateLimitResponse_RateLimit_Unit, mult uint32) error {
	if err := engine.CheckLimit(rate(perUnit, unit, mult), float64(perUnit)); err != nil {
		if mult > 1 {
			return fmt.Errorf("requests_per_unit %d per %d %s: %w", perUnit, mult, unit, err)
		}
		return fmt.Errorf("requests_per_unit %d per %s: %w", perUnit, unit, err)
	}
	return nil
}
