package idem

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/idemkit/sdk/internal/argsfp"
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

// A key's entry gives back the fingerprint remembered with it only for the
// same bytes of arguments, keeps it when the key is added again, and loses
// it with the key.
func TestRecentOpsRememberFingerprint(t *testing.T) {
	r := newRecentOps(2)
	k, other := Key{Collection: "idem_ops", ID: "k"}, Key{Collection: "idem_ops", ID: "other"}
	args := json.RawMessage(`{"text":"a","op_id":"k"}`)
	fp, err := argsfp.Of(args)
	if err != nil {
		t.Fatal(err)
	}
	r.remember(k, args, fp)
	if got := r.fingerprint(k, args); got != fp {
		t.Fatalf("fingerprint of the same bytes = %q, want %q", got, fp)
	}
	// The same arguments in other bytes, and other arguments: not known.
	for _, a := range []string{`{"op_id":"k","text":"a"}`, `{"text":"b","op_id":"k"}`, ``} {
		if got := r.fingerprint(k, json.RawMessage(a)); got != "" {
			t.Errorf("fingerprint of %s = %q, want none", a, got)
		}
	}
	if got := r.fingerprint(other, args); got != "" {
		t.Errorf("fingerprint under another key = %q, want none", got)
	}
	r.add(k)
	r.remember(k, args, "") // nothing known: what the entry knows stays
	if got := r.fingerprint(k, args); got != fp {
		t.Errorf("after add and remember without a fingerprint: %q, want %q", got, fp)
	}
	r.remember(other, args, fp)
	r.add(Key{Collection: "idem_ops", ID: "third"}) // forgets k
	if r.has(k) || r.fingerprint(k, args) != "" {
		t.Error("a forgotten key still gives its fingerprint")
	}
}
