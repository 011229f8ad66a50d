package settings

import (
	"strings"
	"testing"
)

func TestParseUpgradeList(t *testing.T) {
	for _, tt := range []struct {
		list, want, err string
	}{
		{"", "", ""},
		{" ", "", ""},
		{"websocket", "websocket", ""},
		{"WebSocket, foo", "websocket foo", ""},
		{"websocket,", "", "empty protocol name"},
		{"h2c", "", "h2c is never forwarded"},
		{"websocket/13", "", "not a protocol name"},
		{"web socket", "", "not a protocol name"},
	} {
		names, err := ParseUpgradeList(tt.list)
		if got := strings.Join(names, " "); got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseUpgradeList(%q) = %q, %v; want %q, %q", tt.list, got, err, tt.want, tt.err)
		}
	}
}
