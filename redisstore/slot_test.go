package redisstore

import (
	"math/rand/v2"
	"testing"
)

// oldSlotOf is the byte scan slotOf and KeyFor each made before hashTag.
func oldSlotOf(key string) (slot int, tagged bool) {
	s := key
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						s, tagged = key[i+1:j], true
					}
					break
				}
			}
			break
		}
	}
	return int(crc16(s) & 16383), tagged
}

// hashTag finds the tag Redis hashes: the text between the first '{' and
// the first '}' after it, if not empty.
func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"{a}": "a", "x{ab}y": "ab", "{a}{b}": "a", "{}": "", "{}{a}": "", "a}{b}": "b",
		"{{a}}": "{a", "{": "", "}": "", "": "", "a": "", "{a": "", "a}": "", "{a}}": "a",
	} {
		start, end, ok := hashTag(key)
		if ok != (want != "") || ok && key[start:end] != want {
			t.Errorf("hashTag(%q) = %d, %d, %v; want %q", key, start, end, ok, want)
		}
	}
	// Known slots (CLUSTER KEYSLOT).
	for key, want := range map[string]int{"foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363} {
		if got := slotOf(key); got != want {
			t.Errorf("slotOf(%q) = %d, want %d", key, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}ab")
	for range 20000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		key := string(b)
		slot, tagged := oldSlotOf(key)
		_, _, ok := hashTag(key)
		if slotOf(key) != slot || ok != tagged {
			t.Fatalf("%q: slotOf %d, tagged %v; the byte scan gave %d, %v", key, slotOf(key), ok, slot, tagged)
		}
	}
}
