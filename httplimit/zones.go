package httplimit

import (
	"errors"
	"sync"
	"time"
)

// maxZones bounds the zones loadZone keeps: far more than the zones in
// use, and few enough that values read from requests cannot grow it
// without bound.
const maxZones = 1024

// zones caches time.LoadLocation, which reads the zone database on every
// call: a quota whose zone comes from a request asks for one on every
// check. A name that failed is kept too (nil), so that a value that names
// no zone costs a map lookup, not a search of the zone database.
var zones struct {
	sync.Mutex
	m map[string]*time.Location
}

// loadZone is time.LoadLocation, cached. "" and "Local" are refused: a
// calendar in the process's own zone would move with the host.
func loadZone(name string) (*time.Location, error) {
	zones.Lock()
	loc, ok := zones.m[name]
	zones.Unlock()
	switch {
	case ok && loc == nil:
		return nil, errUnknownZone
	case ok:
		return loc, nil
	case name == "" || name == "Local":
		return nil, errZoneName
	}
	loc, err := time.LoadLocation(name)
	zones.Lock()
	defer zones.Unlock()
	if zones.m == nil || len(zones.m) >= maxZones {
		zones.m = map[string]*time.Location{}
	}
	zones.m[name] = loc // nil if it failed
	if err != nil {
		return nil, errUnknownZone
	}
	return loc, nil
}

var (
	errZoneName    = zoneNameError{}
	errUnknownZone = errors.New("unknown time zone")
)

type zoneNameError struct{}

func (zoneNameError) Error() string { return `a zone must be named, as "UTC" or "Europe/Berlin"` }
