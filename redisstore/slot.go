package redisstore

import "strings"

// hashTag returns the bounds of key's Redis Cluster hash tag, key[start:end]:
// the text between the first '{' and the first '}' after it. ok is false
// when key has none: no '{', no '}' after it, or nothing between them (Redis
// then hashes the whole key).
func hashTag(key string) (start, end int, ok bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return 0, 0, false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return 0, 0, false
	}
	return i + 1, i + 1 + j, true
}

// slotOf returns key's Redis Cluster hash slot: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func slotOf(key string) int {
	if start, end, ok := hashTag(key); ok {
		key = key[start:end]
	}
	return int(crc16(key) & 16383)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
