package redisstore

// slotOf returns key's Redis Cluster hash slot: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func slotOf(key string) int {
	s := key
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						s = key[i+1 : j]
					}
					break
				}
			}
			break
		}
	}
	return int(crc16(s) & 16383)
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
