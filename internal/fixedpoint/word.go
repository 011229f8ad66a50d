package fixedpoint

// Word is one bucket's whole state: a tick field above a token field, in the
// widths of a Layout. It is a value, so two equal words are the same state.
//
// The tick field holds the bucket's last update relative to a base tick that
// belongs to the bucket, not to the word: the base of the bucket's epoch
// (Base), fixed for the bucket's life. A tick field of T bits spans 2^T ticks
// from the base, so a word is exact for every tick in [base, base+2^T),
// whatever the time is now: an idle bucket is read exactly after any jump of
// the clock. A write whose tick lies past that span cannot be packed; the
// bucket must then be replaced by one of a later epoch (see Pack).
type Word uint64

// Tomb is the word of an evicted or replaced bucket. Its token field is all
// ones, which is above every capacity a Layout accepts, so no live bucket can
// ever hold it.
const Tomb = ^Word(0)

// Epoch numbers the spans of 2^(TickBits-1) ticks (half a tick field's span)
// from tick 0; epoch e starts at tick Base(e). In the clamped time range it
// fits an int32: ticks of at least 2^(36-T) ns give at most 2^27 epochs each
// side of the epoch.
type Epoch int32

// EpochOf returns the epoch a new word stamped at tick should take: the one
// whose first half holds tick, so that the bucket has at least half a span of
// later ticks before it must be replaced.
func (l *Layout) EpochOf(tick int64) Epoch { return Epoch(tick >> l.epochShift) }

// Base returns the first tick of epoch e.
func (l *Layout) Base(e Epoch) int64 { return int64(e) << l.epochShift }

// Pack builds the word of a bucket of epoch base holding tokens quanta, last
// updated at tick. It reports false, and returns Tomb, when tick lies outside
// [base, base+2^TickBits): the bucket needs a later epoch. tokens must not
// exceed l.capacity.
func (l *Layout) Pack(base, tick int64, tokens uint64) (Word, bool) {
	off := uint64(tick - base)
	if tick < base || off > l.tickMask {
		return Tomb, false
	}
	return Word(off)<<l.tokenBits | Word(tokens), true
}

// PackNew returns the epoch and the word of a new bucket holding tokens
// quanta, last updated at tick: the epoch EpochOf(tick), which always holds
// it.
func (l *Layout) PackNew(tick int64, tokens uint64) (Epoch, Word) {
	e := l.EpochOf(tick)
	w, _ := l.Pack(l.Base(e), tick, tokens)
	return e, w
}

// Tokens returns the token field of w, in quanta.
func (l *Layout) Tokens(w Word) uint64 { return uint64(w) & l.tokenMask }

// Resolve returns the absolute tick of w's last update, given base, the first
// tick of its bucket's epoch: base plus w's tick field.
func (l *Layout) Resolve(w Word, base int64) int64 { return base + int64(uint64(w)>>l.tokenBits) }
