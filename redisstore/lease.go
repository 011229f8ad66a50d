package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

var (
	leaseLua   = newScript(leaseScript)
	releaseLua = newScript(releaseScript)
)

// grant is a lease script's reply: quanta granted (0 for none) and the
// bucket's state after it, in the script's units.
type grant struct {
	// now is Redis TIME in microseconds.
	now int64
	// quanta is what was granted; expiry is the microsecond the lease ends
	// at (0 if nothing was granted).
	quanta uint64
	expiry int64
	// at and tokens are the bucket's tick and quanta; out is the quanta
	// held by every unexpired lease, this one included.
	at     int64
	tokens uint64
	out    uint64
	// lastEnd is, when nothing was granted, the microsecond the last
	// lease held ends (0 if none).
	lastEnd int64
}

// leaseKeys returns the keys of key's leased bucket and of its leases. They
// are apart from its per-check bucket (KeyFor), whose script knows nothing
// of leases, and share its hash tag.
func (l *Limiter) leaseKeys(key string) (bucket, leases string) {
	k := l.KeyFor(key)
	return k + ":lb", k + ":ll"
}

// lease asks key's leased bucket for want quanta, granting as many as it
// holds if that is at least least (and above 0), for ttl, under the lease
// id (no spaces). If prev is not "", the lease prev ends first, its unspent
// quanta back in the bucket. want 0 only reports the bucket.
func (l *Limiter) lease(ctx context.Context, key string, want, least uint64, ttl time.Duration, id, prev string, unspent uint64) (grant, error) {
	us := ttl.Microseconds()
	if us <= 0 {
		return grant{}, fmt.Errorf("redisstore: lease ttl %v, want at least 1µs", ttl)
	}
	b, lk := l.leaseKeys(key)
	s := l.s
	v, err := l.call(ctx, leaseLua, []string{b, lk}, []string{s.capArg, s.pArg, s.qArg, s.fillArg,
		strconv.FormatUint(want, 10), strconv.FormatUint(least, 10), strconv.FormatInt(us, 10), id,
		prev, strconv.FormatUint(unspent, 10)})
	if err != nil {
		return grant{}, err
	}
	if len(v) != 7 {
		return grant{}, errReply
	}
	return grant{now: v[0], quanta: uint64(v[1]), at: v[2], tokens: uint64(v[3]), out: uint64(v[4]), expiry: v[5], lastEnd: v[6]}, nil
}

// release ends lease id of key early, giving unspent quanta back. It
// reports whether the lease was still held (an expired one gives nothing
// back), and the bucket after.
func (l *Limiter) release(ctx context.Context, key, id string, unspent uint64) (bool, grant, error) {
	b, lk := l.leaseKeys(key)
	s := l.s
	v, err := l.call(ctx, releaseLua, []string{b, lk}, []string{s.capArg, s.pArg, s.qArg, s.fillArg,
		id, strconv.FormatUint(unspent, 10)})
	if err != nil {
		return false, grant{}, err
	}
	if len(v) != 5 {
		return false, grant{}, errReply
	}
	return v[1] == 1, grant{now: v[0], at: v[2], tokens: uint64(v[3]), out: uint64(v[4])}, nil
}

// waitFor is the wait from g's time until the bucket can grant need quanta,
// if nothing else takes from it: its refill, after the last lease held ends
// if leases hold what the bucket lacks. Never early: the bucket holds at
// least what it holds now when the leases end.
func (u units) waitFor(g grant, need uint64) time.Duration {
	wait := u.wait(g.at, g.tokens, need, g.now)
	if need > u.capacity-g.out && g.lastEnd > g.now {
		wait += time.Duration(g.lastEnd-g.now) * time.Microsecond
	}
	return wait
}
