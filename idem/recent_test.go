package idem

import (
	"strconv"
	"testing"
)

// The set holds the last size keys added, forgetting the oldest first, and
// adding a key it holds changes nothing.
func TestRecentOpsForgetsOldestFirst(t *testing.T) {
	r := newRecentOps(3)
	key := func(i int) Key { return Key{Collection: "idem_ops", ID: strconv.Itoa(i)} }
	for i := range 3 {
		r.add(key(i))
	}
	r.add(key(0)) // held: not added again, 0 stays the oldest
	r.add(key(3)) // forgets 0
	r.add(key(4)) // forgets 1
	for i, want := range []bool{false, false, true, true, true} {
		if got := r.has(key(i)); got != want {
			t.Errorf("has(%d) = %v, want %v", i, got, want)
		}
	}
	if len(r.set) != 3 || len(r.ring) != 3 {
		t.Errorf("holds %d keys in a ring of %d, want 3 and 3", len(r.set), len(r.ring))
	}
}
