package settings

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ParseUpgradeList parses --upgrade: protocol names, compared without
// regard to case.
func ParseUpgradeList(list string) ([]string, error) {
	var names []string
	for _, f := range strings.Split(list, ",") {
		name := strings.ToLower(strings.TrimSpace(f))
		switch {
		case name == "" && strings.TrimSpace(list) == "":
			return nil, nil
		case name == "":
			return nil, fmt.Errorf("empty protocol name in %q", list)
		case !httpguts.ValidHeaderFieldName(name): // an RFC 9110 token
			return nil, fmt.Errorf("%q is not a protocol name such as websocket (an HTTP token, without a version)", name)
		case name == "h2c":
			return nil, errors.New("h2c is never forwarded: an upgrade to it is proxied as plain HTTP/1.1")
		}
		names = append(names, name)
	}
	return names, nil
}
