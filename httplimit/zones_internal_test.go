package httplimit

import "testing"

// A name that is no zone, as a hostile or broken claim would send on
// every request, is looked up in the zone database once, then answered
// from the cache; a good one is cached as its Location.
func TestLoadZoneCachesFailures(t *testing.T) {
	const bogus = "Nowhere/Not_A_Zone_7f3a"
	if _, err := loadZone(bogus); err == nil {
		t.Fatal("a bogus zone loaded")
	}
	zones.Lock()
	loc, cached := zones.m[bogus]
	zones.Unlock()
	if !cached || loc != nil {
		t.Fatalf("the failed name is not cached as a failure: %v %v", cached, loc)
	}
	if _, err := loadZone(bogus); err != errUnknownZone {
		t.Errorf("the second lookup: %v, want the cached failure", err)
	}
	if loc, err := loadZone("Asia/Tokyo"); err != nil || loc.String() != "Asia/Tokyo" {
		t.Errorf("Asia/Tokyo: %v %v", loc, err)
	}
}
