package fixedpoint

// Word is one bucket's whole state: a tick field above a token field, in the
// widths of a Layout. It is a value, so two equal words are the same state.
type Word uint64

// Tomb is the word of an evicted bucket. Its token field is all ones, which is
// above every capacity a Layout accepts, so no live bucket can ever hold it.
const Tomb = ^Word(0)

// Pack builds the word of a bucket holding tokens quanta, last updated at
// tick. Only the low TickBits bits of tick are kept; Resolve restores them.
// tokens must not exceed l.Capacity.
func (l *Layout) Pack(tick int64, tokens uint64) Word {
	return Word(uint64(tick)&l.tickMask)<<l.TokenBits | Word(tokens)
}

// Tokens returns the token field of w, in quanta.
func (l *Layout) Tokens(w Word) uint64 { return uint64(w) & l.tokenMask }

// TickField returns the raw (wrapped) tick field of w.
func (l *Layout) TickField(w Word) uint64 { return uint64(w) >> l.TokenBits }

// Resolve returns the absolute tick of w's last update, given ref, the
// engine's reference tick. Of all ticks whose low bits equal w's tick field it
// picks the one in the window (ref+Lead-2^TickBits, ref+Lead]. Every word that
// is written or swept often enough lies in that window, so the answer is
// exact; for a word left outside it the answer is later than the truth, which
// can only withhold tokens, never create them.
func (l *Layout) Resolve(w Word, ref int64) int64 {
	top := ref + l.Lead
	back := (uint64(top) - l.TickField(w)) & l.tickMask
	return top - int64(back)
}
