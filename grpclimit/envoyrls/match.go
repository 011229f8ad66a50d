package envoyrls

import (
	"encoding/binary"
	"strings"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match finds the limit of a request descriptor in d, as the reference
// does: at each level the entry's "key_value" child, else the first
// wildcard child that matches it, else the entry's "key" child; a limit
// applies only at the level of the descriptor's last entry (the request
// and the configuration path have the same depth). shared, when not nil,
// holds per entry the value pattern a share_threshold wildcard counts the
// entry under ("" for the entry's own value).
func (d *Domain) match(entries []*common.RateLimitDescriptor_Entry) (lim *Limit, shared []string) {
	level := &d.root
	for i, e := range entries {
		next, how := level.step(e)
		if next == nil {
			return nil, nil
		}
		if how == byWildcard && next.shared != "" {
			if shared == nil {
				shared = make([]string, len(entries))
			}
			shared[i] = next.shared
		}
		if i == len(entries)-1 {
			return next.limit, shared
		}
		if len(next.children) == 0 {
			return nil, nil
		}
		level = next
	}
	return nil, nil
}

// How a request entry matched a child.
const (
	byValue    = iota // its "key_value"
	byWildcard        // a wildcard child
	byKey             // its "key" alone
)

// step finds the child of n that entry e matches, and how.
func (n *node) step(e *common.RateLimitDescriptor_Entry) (*node, int) {
	composite := e.GetKey() + "_" + e.GetValue()
	if c := n.children[composite]; c != nil {
		return c, byValue
	}
	for _, w := range n.wild {
		if wildMatch(w.parts, composite) {
			return w.n, byWildcard
		}
	}
	return n.children[e.GetKey()], byKey
}

// wildMatch reports whether s matches the pattern split at its '*'s, each
// '*' standing for any run of bytes, possibly empty.
func wildMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}

// bucketKey is the key of a descriptor's bucket: the domain and every
// entry's key and value (or the shared pattern a share_threshold wildcard
// counts it under), each length-prefixed so that no two descriptors
// share a key by accident of their bytes.
func bucketKey(domain string, entries []*common.RateLimitDescriptor_Entry, shared []string) string {
	n := len(domain) + 2
	for _, e := range entries {
		n += len(e.GetKey()) + len(e.GetValue()) + 4
	}
	b := make([]byte, 0, n)
	b = appendField(b, domain)
	for i, e := range entries {
		b = appendField(b, e.GetKey())
		if shared != nil && shared[i] != "" {
			b = append(b, '*')
			b = appendField(b, shared[i])
		} else {
			b = appendField(b, e.GetValue())
		}
	}
	return string(b)
}

func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
