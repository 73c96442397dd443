package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// contractEpoch is where every contract subtest's clock starts: a whole
// second, so that backends storing expiry at second precision agree.
var contractEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// contractDoc is the document most contract subtests store.
type contractDoc struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

// unmarshalable fails to encode, so a write of it must fail and write nothing.
type unmarshalable struct{}

var errUnmarshalable = errors.New("storetest: this document refuses to marshal")

func (unmarshalable) MarshalJSON() ([]byte, error) { return nil, errUnmarshalable }

// contract holds one subtest's store and clock.
type contract struct {
	t     *testing.T
	s     idem.Store
	clock *Clock
	max   int
}

func newContract(t *testing.T, h Harness) *contract {
	t.Helper()
	c := NewClock(contractEpoch)
	s := h.New(t, c.Now)
	if s == nil {
		t.Fatal("storetest: Harness.New returned nil")
	}
	return &contract{t: t, s: s, clock: c, max: h.MaxDocumentBytes}
}

func ckey(id string) idem.Key { return idem.Key{Collection: "contract", ID: id} }

// run runs fn in one transaction and fails the test if Run fails.
func (c *contract) run(fn func(ctx context.Context, tx idem.Tx) error) {
	c.t.Helper()
	if err := c.s.Run(c.t.Context(), fn); err != nil {
		c.t.Fatalf("Run: %v", err)
	}
}

// op runs one operation in its own transaction, which commits whatever the
// operation returned, and returns the operation's error.
func (c *contract) op(fn func(ctx context.Context, tx idem.Tx) error) error {
	c.t.Helper()
	var opErr error
	c.run(func(ctx context.Context, tx idem.Tx) error {
		opErr = fn(ctx, tx)
		return nil
	})
	return opErr
}

// get reads k in its own transaction.
func (c *contract) get(k idem.Key) (contractDoc, idem.Version, error) {
	c.t.Helper()
	var d contractDoc
	var v idem.Version
	err := c.op(func(ctx context.Context, tx idem.Tx) error {
		var err error
		d = contractDoc{}
		v, err = tx.Get(ctx, k, &d)
		return err
	})
	return d, v, err
}

// mustGet reads k and fails the test unless it is live.
func (c *contract) mustGet(k idem.Key) (contractDoc, idem.Version) {
	c.t.Helper()
	d, v, err := c.get(k)
	if err != nil {
		c.t.Fatalf("Get(%s): %v", k, err)
	}
	if v == 0 {
		c.t.Fatalf("Get(%s) returned version 0 for a live document", k)
	}
	return d, v
}

// mustAbsent fails the test unless k reads as absent.
func (c *contract) mustAbsent(k idem.Key) {
	c.t.Helper()
	_, v, err := c.get(k)
	if !errors.Is(err, idem.ErrNotFound) {
		c.t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
	}
	if v != 0 {
		c.t.Fatalf("Get(%s) of an absent document returned version %d, want 0", k, v)
	}
}

func (c *contract) create(k idem.Key, d any, opts ...backend.WriteOption) error {
	c.t.Helper()
	return c.op(func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, d, opts...) })
}

func (c *contract) put(k idem.Key, d any, opts ...backend.WriteOption) error {
	c.t.Helper()
	return c.op(func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, d, opts...) })
}

func (c *contract) update(k idem.Key, v idem.Version, d any, opts ...backend.WriteOption) error {
	c.t.Helper()
	return c.op(func(ctx context.Context, tx idem.Tx) error { return tx.Update(ctx, k, v, d, opts...) })
}

func (c *contract) delete(k idem.Key, v idem.Version) error {
	c.t.Helper()
	return c.op(func(ctx context.Context, tx idem.Tx) error { return tx.Delete(ctx, k, v) })
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("%s: %v, want success", what, got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("%s: %v, want an error wrapping %v", what, got, want)
	}
}

func runContract(t *testing.T, h Harness) {
	if h.MaxDocumentBytes < 16 {
		t.Fatal("storetest: Harness.MaxDocumentBytes must be set")
	}
	t.Run("CreateGet", func(t *testing.T) { t.Parallel(); testCreateGet(t, h) })
	t.Run("Put", func(t *testing.T) { t.Parallel(); testPut(t, h) })
	t.Run("Update", func(t *testing.T) { t.Parallel(); testUpdate(t, h) })
	t.Run("Delete", func(t *testing.T) { t.Parallel(); testDelete(t, h) })
	t.Run("VersionsNeverRepeat", func(t *testing.T) { t.Parallel(); testVersionsNeverRepeat(t, h) })
	t.Run("WrappedSentinels", func(t *testing.T) { t.Parallel(); testWrappedSentinels(t, h) })
	t.Run("InvalidKey", func(t *testing.T) { t.Parallel(); testInvalidKey(t, h) })
	t.Run("Owner", func(t *testing.T) { t.Parallel(); testOwner(t, h) })
	t.Run("MarshalError", func(t *testing.T) { t.Parallel(); testMarshalError(t, h) })
	t.Run("ConcurrentCreate", func(t *testing.T) { t.Parallel(); testConcurrentCreate(t, h) })
	t.Run("ConcurrentUpdate", func(t *testing.T) { t.Parallel(); testConcurrentUpdate(t, h) })
	t.Run("RetryOnConflict", func(t *testing.T) { t.Parallel(); testRetryOnConflict(t, h) })
	t.Run("DeleteOnConflict", func(t *testing.T) { t.Parallel(); testDeleteOnConflict(t, h) })
	t.Run("RetryOnConflictError", func(t *testing.T) { t.Parallel(); testRetryOnConflictError(t, h) })
	t.Run("ConflictBounded", func(t *testing.T) { t.Parallel(); testConflictBounded(t, h) })
	t.Run("FnError", func(t *testing.T) { t.Parallel(); testFnError(t, h) })
	t.Run("Panic", func(t *testing.T) { t.Parallel(); testPanic(t, h) })
	t.Run("ReadYourWrites", func(t *testing.T) { t.Parallel(); testReadYourWrites(t, h) })
	t.Run("Atomicity", func(t *testing.T) { t.Parallel(); testAtomicity(t, h) })
	t.Run("Expiry", func(t *testing.T) { t.Parallel(); testExpiry(t, h) })
	t.Run("ExpiryBoundary", func(t *testing.T) { t.Parallel(); testExpiryBoundary(t, h) })
	t.Run("Limits", func(t *testing.T) { t.Parallel(); testLimits(t, h) })
	t.Run("LimitRollsBackTx", func(t *testing.T) { t.Parallel(); testLimitRollsBackTx(t, h) })
	t.Run("Sweep", func(t *testing.T) { t.Parallel(); testSweep(t, h) })
	t.Run("SweepManyBatches", func(t *testing.T) { t.Parallel(); testSweepManyBatches(t, h) })
	t.Run("SweepRewritten", func(t *testing.T) { t.Parallel(); testSweepRewritten(t, h) })
}

func testCreateGet(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("a")
	c.mustAbsent(k)
	wantErr(t, "Create on absent", c.create(k, contractDoc{N: 1, S: "one"}), nil)
	d, v := c.mustGet(k)
	if d != (contractDoc{N: 1, S: "one"}) {
		t.Fatalf("Get after Create = %+v, want {1 one}", d)
	}
	var nilV idem.Version
	wantErr(t, "Get with nil dst", c.op(func(ctx context.Context, tx idem.Tx) error {
		var err error
		nilV, err = tx.Get(ctx, k, nil)
		return err
	}), nil)
	if nilV != v {
		t.Fatalf("Get with nil dst returned version %d, want %d", nilV, v)
	}
	wantErr(t, "Create on a live document", c.create(k, contractDoc{N: 2}), idem.ErrExists)
	d2, v2 := c.mustGet(k)
	if d2 != d || v2 != v {
		t.Fatalf("failed Create changed the document: got %+v@%d, want %+v@%d", d2, v2, d, v)
	}
	// Other keys, including one in another collection with the same id, are
	// untouched.
	c.mustAbsent(ckey("b"))
	c.mustAbsent(idem.Key{Collection: "contract2", ID: "a"})
}

func testPut(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("p")
	wantErr(t, "Put on absent", c.put(k, contractDoc{N: 1}), nil)
	d1, v1 := c.mustGet(k)
	if d1.N != 1 {
		t.Fatalf("Get after Put = %+v, want N=1", d1)
	}
	wantErr(t, "Put on existing", c.put(k, contractDoc{N: 2}), nil)
	d2, v2 := c.mustGet(k)
	if d2.N != 2 {
		t.Fatalf("Get after second Put = %+v, want N=2", d2)
	}
	// The same document again is still a write: a new version.
	wantErr(t, "Put of the same document", c.put(k, contractDoc{N: 2}), nil)
	_, v3 := c.mustGet(k)
	if v1 == v2 || v2 == v3 || v1 == v3 {
		t.Fatalf("Put did not change the version on every write: %d, %d, %d", v1, v2, v3)
	}
}

func testUpdate(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("u")
	wantErr(t, "Update on absent", c.update(k, 1, contractDoc{N: 1}), idem.ErrNotFound)
	c.mustAbsent(k)

	wantErr(t, "Create", c.create(k, contractDoc{N: 1}), nil)
	_, v1 := c.mustGet(k)
	wantErr(t, "Update at the current version", c.update(k, v1, contractDoc{N: 2}), nil)
	d2, v2 := c.mustGet(k)
	if d2.N != 2 {
		t.Fatalf("Get after Update = %+v, want N=2", d2)
	}
	if v2 == v1 {
		t.Fatalf("Update did not change the version (%d)", v1)
	}
	wantErr(t, "Update at a stale version", c.update(k, v1, contractDoc{N: 3}), idem.ErrConflict)
	wantErr(t, "Update at version 0", c.update(k, 0, contractDoc{N: 3}), idem.ErrConflict)
	wantErr(t, "Update at a version never given", c.update(k, v2+1000, contractDoc{N: 3}), idem.ErrConflict)
	d3, v3 := c.mustGet(k)
	if d3 != d2 || v3 != v2 {
		t.Fatalf("failed Update changed the document: got %+v@%d, want %+v@%d", d3, v3, d2, v2)
	}
}

func testDelete(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("d")
	wantErr(t, "Delete absent, unconditional", c.delete(k, 0), idem.ErrNotFound)
	wantErr(t, "Delete absent, conditional", c.delete(k, 7), idem.ErrNotFound)

	wantErr(t, "Create", c.create(k, contractDoc{N: 1}), nil)
	_, v1 := c.mustGet(k)
	wantErr(t, "Put", c.put(k, contractDoc{N: 2}), nil)
	d2, v2 := c.mustGet(k)
	wantErr(t, "Delete at a stale version", c.delete(k, v1), idem.ErrConflict)
	d, v := c.mustGet(k)
	if d != d2 || v != v2 {
		t.Fatalf("failed Delete changed the document: got %+v@%d, want %+v@%d", d, v, d2, v2)
	}
	wantErr(t, "Delete at the current version", c.delete(k, v2), nil)
	c.mustAbsent(k)
	wantErr(t, "Delete again", c.delete(k, 0), idem.ErrNotFound)

	wantErr(t, "Create after Delete", c.create(k, contractDoc{N: 3}), nil)
	wantErr(t, "Delete unconditional", c.delete(k, 0), nil)
	c.mustAbsent(k)
}

func testVersionsNeverRepeat(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("v")
	seen := map[idem.Version]string{}
	record := func(what string) idem.Version {
		t.Helper()
		_, v := c.mustGet(k)
		if prev, dup := seen[v]; dup {
			t.Fatalf("version %d after %s repeats the version after %s", v, what, prev)
		}
		seen[v] = what
		return v
	}
	wantErr(t, "Create", c.create(k, contractDoc{N: 1}), nil)
	v1 := record("first Create")
	wantErr(t, "Delete", c.delete(k, 0), nil)
	wantErr(t, "Create after Delete", c.create(k, contractDoc{N: 1}), nil)
	record("Create after Delete")
	// The version the deleted document had must not match the new one.
	wantErr(t, "Update at the deleted document's version", c.update(k, v1, contractDoc{N: 9}), idem.ErrConflict)
	wantErr(t, "Put", c.put(k, contractDoc{N: 1}), nil)
	v3 := record("Put")
	wantErr(t, "Update", c.update(k, v3, contractDoc{N: 1}), nil)
	record("Update")
	// A write of another key does not reuse this key's versions either.
	other := ckey("v2")
	wantErr(t, "Create other", c.create(other, contractDoc{N: 1}), nil)
	_, vo := c.mustGet(other)
	if _, dup := seen[vo]; dup {
		t.Fatalf("another key got version %d, already used for %s", vo, seen[vo])
	}
	wantErr(t, "Delete other", c.delete(other, 0), nil)
	wantErr(t, "Delete", c.delete(k, 0), nil)
	wantErr(t, "Create after deleting every document", c.create(k, contractDoc{N: 1}), nil)
	record("Create after deleting every document")
}

func testWrappedSentinels(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("w")
	wantErr(t, "Create", c.create(k, contractDoc{N: 1}), nil)
	// fn wraps the Tx's error; Run returns it and errors.Is still finds the
	// sentinel (and Run does not mistake it for something to retry).
	err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, k, contractDoc{N: 2}); err != nil {
			return fmt.Errorf("creating: %w", err)
		}
		return nil
	})
	wantErr(t, "Run returning a wrapped ErrExists", err, idem.ErrExists)
	err = c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, ckey("nope"), nil); err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		return nil
	})
	wantErr(t, "Run returning a wrapped ErrNotFound", err, idem.ErrNotFound)
	err = c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		return fmt.Errorf("deleting: %w", tx.Delete(ctx, ckey("nope"), 0))
	})
	wantErr(t, "Run returning a wrapped ErrNotFound from Delete", err, idem.ErrNotFound)
	d, _ := c.mustGet(k)
	if d.N != 1 {
		t.Fatalf("document changed to %+v", d)
	}
}

func testInvalidKey(t *testing.T, h Harness) {
	c := newContract(t, h)
	long := strings.Repeat("x", 513)
	cases := []struct {
		name string
		k    idem.Key
		near []idem.Key // valid keys a sloppy backend might write instead
	}{
		{"empty collection", idem.Key{ID: "a"}, []idem.Key{{Collection: "a", ID: "a"}}},
		{"long collection", idem.Key{Collection: strings.Repeat("c", 65), ID: "a"},
			[]idem.Key{{Collection: strings.Repeat("c", 64), ID: "a"}}},
		{"upper-case collection", idem.Key{Collection: "Contract", ID: "a"}, []idem.Key{ckey("a")}},
		{"slash in collection", idem.Key{Collection: "contract/a", ID: "a"},
			[]idem.Key{ckey("a"), {Collection: "contracta", ID: "a"}}},
		{"empty id", ckey(""), nil},
		{"long id", ckey(long), []idem.Key{ckey(long[:512])}},
		{"invalid UTF-8 id", ckey("a\xffb"), []idem.Key{ckey("ab"), ckey("a\uFFFDb")}},
		{"slash in id", ckey("a/b"), []idem.Key{ckey("a"), ckey("b"), ckey("ab")}},
		{"control character in id", ckey("a\nb"), []idem.Key{ckey("ab"), ckey("a")}},
		{"DEL in id", ckey("a\x7fb"), []idem.Key{ckey("ab")}},
		{"NUL in id", ckey("a\x00b"), []idem.Key{ckey("a"), ckey("ab")}},
	}
	for _, tc := range cases {
		if err := tc.k.Validate(); !errors.Is(err, backend.ErrInvalidKey) {
			t.Fatalf("%s: the test's key is valid (%v)", tc.name, err)
		}
		c.wantInvalid(tc.name, tc.k)
		for _, n := range tc.near {
			if n.Validate() != nil {
				t.Fatalf("%s: near key %q is invalid", tc.name, n)
			}
			c.mustAbsent(n)
		}
	}
	// A valid write in the same transaction as the rejected ones commits.
	c.run(func(ctx context.Context, tx idem.Tx) error {
		_ = tx.Put(ctx, ckey("a/b"), contractDoc{N: 1})
		return tx.Put(ctx, ckey("ok"), contractDoc{N: 2})
	})
	if d, _ := c.mustGet(ckey("ok")); d.N != 2 {
		t.Fatalf("Get(ok) = %+v, want N=2", d)
	}
	c.mustAbsent(ckey("a"))
}

// wantInvalid fails the test unless every Tx method refuses k with an error
// wrapping ErrInvalidKey.
func (c *contract) wantInvalid(name string, k idem.Key) {
	c.t.Helper()
	ops := []struct {
		op string
		fn func(ctx context.Context, tx idem.Tx) error
	}{
		{"Get", func(ctx context.Context, tx idem.Tx) error { _, err := tx.Get(ctx, k, nil); return err }},
		{"Create", func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, contractDoc{N: 1}) }},
		{"Put", func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, contractDoc{N: 1}) }},
		{"Update", func(ctx context.Context, tx idem.Tx) error { return tx.Update(ctx, k, 1, contractDoc{N: 1}) }},
		{"Delete", func(ctx context.Context, tx idem.Tx) error { return tx.Delete(ctx, k, 0) }},
	}
	for _, o := range ops {
		wantErr(c.t, name+": "+o.op, c.op(o.fn), backend.ErrInvalidKey)
	}
}

// keyedDoc is a document and the key it is stored under.
type keyedDoc struct {
	k idem.Key
	d contractDoc
}

// testOwner shows that a key's Owner is part of its identity: keys that
// differ only in Owner are different documents through every Tx method and
// through Reader.Read, and an owner that fails validation is refused on
// every Tx method before anything is written.
func testOwner(t *testing.T, h Harness) {
	c := newContract(t, h)
	alice := idem.Key{Owner: "alice", Collection: "contract", ID: "o"}
	bob := idem.Key{Owner: "bob", Collection: "contract", ID: "o"}
	none := ckey("o")
	docs := []keyedDoc{
		{alice, contractDoc{N: 1, S: "alice"}},
		{bob, contractDoc{N: 2, S: "bob"}},
		{none, contractDoc{N: 3, S: "none"}},
		{idem.Key{Owner: "Alice", Collection: "contract", ID: "o"}, contractDoc{N: 4, S: "Alice"}},
		// A backend joining owner and id with a separator other than '/'
		// would store these two under one key.
		{idem.Key{Owner: "a:b", Collection: "contract", ID: "c"}, contractDoc{N: 5}},
		{idem.Key{Owner: "a", Collection: "contract", ID: "b:c"}, contractDoc{N: 6}},
		{idem.Key{Owner: "a.b", Collection: "contract", ID: "c"}, contractDoc{N: 7}},
		{idem.Key{Owner: "a", Collection: "contract", ID: "b.c"}, contractDoc{N: 8}},
	}
	for _, e := range docs {
		wantErr(t, "Create "+e.k.String(), c.create(e.k, e.d), nil)
	}
	wantAll := func(when string) {
		t.Helper()
		for _, e := range docs {
			if got, _ := c.mustGet(e.k); got != e.d {
				t.Fatalf("%s: Get(%s) = %+v, want %+v", when, e.k, got, e.d)
			}
		}
	}
	wantAll("after creating each owner's document")

	// An owned key round-trips through every Tx method, touching only its
	// own document.
	wantErr(t, "Put alice", c.put(alice, contractDoc{N: 11, S: "alice"}), nil)
	docs[0].d = contractDoc{N: 11, S: "alice"}
	wantAll("after Put of alice's")
	_, v := c.mustGet(alice)
	_, vb := c.mustGet(bob)
	wantErr(t, "Update alice", c.update(alice, v, contractDoc{N: 12, S: "alice"}), nil)
	docs[0].d = contractDoc{N: 12, S: "alice"}
	wantAll("after Update of alice's")
	wantErr(t, "Update alice at a stale version", c.update(alice, v, contractDoc{N: 13}), idem.ErrConflict)
	wantErr(t, "Update bob at his version", c.update(bob, vb, contractDoc{N: 22, S: "bob"}), nil)
	docs[1].d = contractDoc{N: 22, S: "bob"}
	wantAll("after Update of bob's")
	wantErr(t, "Create alice again", c.create(alice, contractDoc{N: 14}), idem.ErrExists)
	_, v = c.mustGet(alice)
	wantErr(t, "Delete alice", c.delete(alice, v), nil)
	c.mustAbsent(alice)
	docs = docs[1:]
	wantAll("after Delete of alice's")
	wantErr(t, "Delete alice again", c.delete(alice, 0), idem.ErrNotFound)
	wantErr(t, "Update alice after Delete", c.update(alice, v, contractDoc{N: 15}), idem.ErrNotFound)

	// One transaction keeps owners apart in its own writes too.
	c.run(func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, alice, contractDoc{N: 31, S: "alice"}); err != nil {
			return err
		}
		if err := tx.Put(ctx, bob, contractDoc{N: 32, S: "bob"}); err != nil {
			return err
		}
		var a, b, n contractDoc
		for _, r := range []struct {
			k   idem.Key
			dst *contractDoc
		}{{alice, &a}, {bob, &b}, {none, &n}} {
			if _, err := tx.Get(ctx, r.k, r.dst); err != nil {
				return fmt.Errorf("Get(%s) in the writing transaction: %w", r.k, err)
			}
		}
		if a.N != 31 || b.N != 32 || n.N != 3 {
			return fmt.Errorf("in the writing transaction: alice %+v, bob %+v, no owner %+v; want 31, 32, 3", a, b, n)
		}
		return nil
	})
	docs[0].d = contractDoc{N: 32, S: "bob"}
	docs = append(docs, keyedDoc{alice, contractDoc{N: 31, S: "alice"}})
	wantAll("after one transaction wrote two owners' documents")

	if h.Reader {
		r := capability[backend.Reader](t, c.s)
		for _, e := range docs {
			var got contractDoc
			if _, err := r.Read(t.Context(), e.k, &got); err != nil || got != e.d {
				t.Fatalf("Read(%s) = %+v, %v; want %+v", e.k, got, err, e.d)
			}
		}
		if _, err := r.Read(t.Context(), idem.Key{Owner: "carol", Collection: "contract", ID: "o"}, nil); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Read of an owner with no document: %v, want ErrNotFound", err)
		}
	}

	long := strings.Repeat("x", 513)
	bad := []struct {
		name  string
		owner string
		near  []string // valid owners a sloppy backend might write instead
	}{
		{"slash in owner", "a/b", []string{"a", "b", "ab"}},
		{"control character in owner", "a\nb", []string{"a", "ab"}},
		{"NUL in owner", "a\x00b", []string{"a", "ab"}},
		{"DEL in owner", "a\x7fb", []string{"ab"}},
		{"long owner", long, []string{long[:512]}},
		{"invalid UTF-8 owner", "a\xffb", []string{"ab", "a\uFFFDb"}},
	}
	for _, tc := range bad {
		k := idem.Key{Owner: tc.owner, Collection: "contract", ID: "o"}
		if err := k.Validate(); !errors.Is(err, backend.ErrInvalidKey) {
			t.Fatalf("%s: the test's key is valid (%v)", tc.name, err)
		}
		c.wantInvalid(tc.name, k)
		if h.Reader {
			if _, err := capability[backend.Reader](t, c.s).Read(t.Context(), k, nil); !errors.Is(err, backend.ErrInvalidKey) {
				t.Fatalf("%s: Read: %v, want ErrInvalidKey", tc.name, err)
			}
		}
		for _, n := range tc.near {
			c.mustAbsent(idem.Key{Owner: n, Collection: "contract", ID: "o"})
		}
	}
	wantAll("after writes under invalid owners")
}

func testMarshalError(t *testing.T, h Harness) {
	c := newContract(t, h)
	absent, present := ckey("absent"), ckey("present")
	wantErr(t, "Create", c.create(present, contractDoc{N: 1}), nil)
	d0, v0 := c.mustGet(present)
	for _, bad := range []any{unmarshalable{}, make(chan int), func() {}} {
		name := fmt.Sprintf("%T", bad)
		errs := map[string]error{
			"Create absent": c.create(absent, bad),
			"Put absent":    c.put(absent, bad),
			"Put present":   c.put(present, bad),
			"Update":        c.update(present, v0, bad),
		}
		for op, err := range errs {
			if err == nil {
				t.Fatalf("%s of a %s succeeded, want an error", op, name)
			}
			if errors.Is(err, backend.ErrInvalidKey) || errors.Is(err, idem.ErrExists) {
				t.Fatalf("%s of a %s: %v, want an encoding error", op, name, err)
			}
		}
		if _, ok := bad.(unmarshalable); ok && !errors.Is(errs["Put absent"], errUnmarshalable) {
			t.Fatalf("Put of a document whose MarshalJSON fails: %v, want an error wrapping its error", errs["Put absent"])
		}
		c.mustAbsent(absent)
		d, v := c.mustGet(present)
		if d != d0 || v != v0 {
			t.Fatalf("failed write of a %s changed the document: got %+v@%d, want %+v@%d", name, d, v, d0, v0)
		}
	}
}

// start runs n goroutines that each call fn(i) once they are all ready, and
// waits for them.
func start(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
}

func testConcurrentCreate(t *testing.T, h Harness) {
	c := newContract(t, h)
	n := h.goroutines(32)
	k := ckey("race")
	errs := make([]error, n)
	start(n, func(i int) {
		errs[i] = c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, k, contractDoc{N: i, S: "winner"})
		})
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("creators %d and %d both won", winner, i)
			}
			winner = i
		case errors.Is(err, idem.ErrExists):
		default:
			t.Fatalf("creator %d: %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no creator won")
	}
	d, _ := c.mustGet(k)
	if d != (contractDoc{N: winner, S: "winner"}) {
		t.Fatalf("stored document %+v, want the winner's (N=%d)", d, winner)
	}
}

func testConcurrentUpdate(t *testing.T, h Harness) {
	c := newContract(t, h)
	n := h.goroutines(32)
	k := ckey("counter")
	wantErr(t, "Create", c.create(k, contractDoc{}), nil)
	errs := make([]error, n)
	start(n, func(i int) {
		errs[i] = c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			var d contractDoc
			v, err := tx.Get(ctx, k, &d)
			if err != nil {
				return err
			}
			d.N++
			if i%2 == 0 {
				return tx.Update(ctx, k, v, d)
			}
			// Half of them write unconditionally: the transaction, not
			// the write, must notice that what it read has changed.
			return tx.Put(ctx, k, d)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("incrementer %d: %v", i, err)
		}
	}
	if d, _ := c.mustGet(k); d.N != n {
		t.Fatalf("counter is %d after %d increments: an update was lost", d.N, n)
	}
}

func testRetryOnConflict(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("retry")
	wantErr(t, "Create", c.create(k, contractDoc{N: 1}), nil)
	// This one adds 10 to what it read. Without a retry the other's +1 is
	// lost.
	attempts, otherErr := c.writeAfterOtherWrite(h, k, func(ctx context.Context, tx idem.Tx, d contractDoc, v idem.Version) error {
		d.N += 10
		// An unconditional write: only the commit's check of what fn read
		// can notice that the other writer got in between.
		return tx.Put(ctx, k, d)
	})
	if otherErr != nil {
		t.Fatalf("concurrent writer: %v", otherErr)
	}
	if !h.Serialized && attempts < 2 {
		t.Fatalf("fn ran %d time(s); a document it read changed before commit, so it must run again", attempts)
	}
	if d, _ := c.mustGet(k); d.N != 12 {
		t.Fatalf("document is %d, want 12 (1, +1 by the other writer, +10): a write was lost", d.N)
	}
}

// testDeleteOnConflict: a Delete at the version fn read, of a document
// another transaction changed before the commit, is not committed: fn runs
// again and sees the change.
func testDeleteOnConflict(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("delete-retry")
	wantErr(t, "Create", c.create(k, contractDoc{N: 1}), nil)
	// This one deletes k only while it is at N=1.
	attempts, otherErr := c.writeAfterOtherWrite(h, k, func(ctx context.Context, tx idem.Tx, d contractDoc, v idem.Version) error {
		if d.N != 1 {
			return nil
		}
		return tx.Delete(ctx, k, v)
	})
	if h.Serialized && errors.Is(otherErr, idem.ErrNotFound) {
		// The other transaction ran after this one, which deleted k.
		c.mustAbsent(k)
		return
	}
	if otherErr != nil {
		t.Fatalf("concurrent writer: %v", otherErr)
	}
	if !h.Serialized && attempts < 2 {
		t.Fatalf("fn ran %d time(s); the document it deleted changed before commit, so it must run again", attempts)
	}
	if d, _ := c.mustGet(k); d.N != 2 {
		t.Fatalf("document is %+v, want N=2: a Delete went out over a change it had not read", d)
	}
}

// writeAfterOtherWrite runs fn in a transaction: fn reads k, and on the
// first attempt another transaction adds 1 to k (otherIncrement) before fn
// calls write with what it read. It returns how many times fn ran and the
// other transaction's error.
func (c *contract) writeAfterOtherWrite(h Harness, k idem.Key, write func(ctx context.Context, tx idem.Tx, d contractDoc, v idem.Version) error) (int, error) {
	c.t.Helper()
	attempts := 0
	var other func() error
	c.run(func(ctx context.Context, tx idem.Tx) error {
		attempts++
		var d contractDoc
		v, err := tx.Get(ctx, k, &d)
		if err != nil {
			return err
		}
		if attempts == 1 {
			if other, err = c.otherIncrement(h, k); err != nil {
				return err
			}
		}
		return write(ctx, tx, d, v)
	})
	return attempts, other()
}

// otherIncrement runs another transaction that adds 1 to k's N and waits
// for it to commit, from inside fn; on a Serialized store, where it waits
// for fn's transaction, it waits only briefly. The function it returns
// waits for the other transaction to end and returns its error.
func (c *contract) otherIncrement(h Harness, k idem.Key) (func() error, error) {
	done := make(chan error, 1)
	go func() {
		done <- c.s.Run(c.t.Context(), func(ctx context.Context, tx idem.Tx) error {
			var d contractDoc
			v, err := tx.Get(ctx, k, &d)
			if err != nil {
				return err
			}
			d.N++
			return tx.Update(ctx, k, v, d)
		})
	}()
	wait := func() error {
		select {
		case err := <-done:
			done <- err
			return err
		case <-time.After(30 * time.Second):
			return errors.New("the other transaction never finished")
		}
	}
	if h.Serialized {
		select {
		case err := <-done:
			done <- err
			return wait, err
		case <-time.After(200 * time.Millisecond):
			// The other transaction waits for this one; waiting the
			// whole way would deadlock.
			return wait, nil
		}
	}
	if err := wait(); err != nil {
		return wait, fmt.Errorf("concurrent writer: %w", err)
	}
	return wait, nil
}

func testRetryOnConflictError(t *testing.T, h Harness) {
	c := newContract(t, h)
	first, second := ckey("first"), ckey("second")
	attempts := 0
	err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		attempts++
		if attempts == 1 {
			if err := tx.Put(ctx, first, contractDoc{N: 1}); err != nil {
				return err
			}
			return fmt.Errorf("stale read: %w", idem.ErrConflict)
		}
		return tx.Put(ctx, second, contractDoc{N: 2})
	})
	wantErr(t, "Run", err, nil)
	if attempts != 2 {
		t.Fatalf("fn ran %d times, want 2 (once more after it returned ErrConflict)", attempts)
	}
	c.mustAbsent(first)
	if d, _ := c.mustGet(second); d.N != 2 {
		t.Fatalf("Get(second) = %+v, want N=2", d)
	}
}

func testConflictBounded(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("bounded")
	attempts := 0
	err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		attempts++
		if err := tx.Put(ctx, k, contractDoc{N: attempts}); err != nil {
			return err
		}
		return fmt.Errorf("always stale: %w", idem.ErrConflict)
	})
	wantErr(t, "Run whose fn always conflicts", err, idem.ErrConflict)
	if attempts < 2 {
		t.Fatalf("fn ran %d time(s), want it retried", attempts)
	}
	c.mustAbsent(k)
}

func testFnError(t *testing.T, h Harness) {
	c := newContract(t, h)
	k, existing := ckey("fnerr"), ckey("existing")
	wantErr(t, "Create", c.create(existing, contractDoc{N: 1}), nil)
	_, v0 := c.mustGet(existing)
	errFn := errors.New("handler failed")
	for _, ret := range []error{errFn, fmt.Errorf("wrapped: %w", errFn), idem.ErrNotFound} {
		attempts := 0
		err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			attempts++
			if err := tx.Create(ctx, k, contractDoc{N: 1}); err != nil {
				return err
			}
			if err := tx.Update(ctx, existing, v0, contractDoc{N: 2}); err != nil {
				return err
			}
			return ret
		})
		if !errors.Is(err, ret) {
			t.Fatalf("Run = %v, want fn's error %v", err, ret)
		}
		if attempts != 1 {
			t.Fatalf("fn returning %v ran %d times, want once", ret, attempts)
		}
		c.mustAbsent(k)
		if d, v := c.mustGet(existing); d.N != 1 || v != v0 {
			t.Fatalf("fn's error kept its update: %+v@%d", d, v)
		}
	}
}

func testPanic(t *testing.T, h Harness) {
	c := newContract(t, h)
	k, existing := ckey("panic"), ckey("existing")
	wantErr(t, "Create", c.create(existing, contractDoc{N: 1}), nil)
	_, v0 := c.mustGet(existing)
	type boom struct{}
	var recovered any
	var runErr error
	func() {
		defer func() { recovered = recover() }()
		runErr = c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Create(ctx, k, contractDoc{N: 1}); err != nil {
				return err
			}
			if err := tx.Update(ctx, existing, v0, contractDoc{N: 2}); err != nil {
				return err
			}
			panic(boom{})
		})
	}()
	if recovered == nil && runErr == nil {
		t.Fatal("fn panicked but Run neither panicked nor returned an error")
	}
	if recovered != nil {
		if _, ok := recovered.(boom); !ok {
			t.Fatalf("Run panicked with %v, want fn's panic value", recovered)
		}
	}
	c.mustAbsent(k)
	if d, v := c.mustGet(existing); d.N != 1 || v != v0 {
		t.Fatalf("panicking fn kept its update: %+v@%d", d, v)
	}
	// The store still works.
	wantErr(t, "Create after a panic", c.create(k, contractDoc{N: 3}), nil)
	if d, _ := c.mustGet(k); d.N != 3 {
		t.Fatalf("Get after Create = %+v, want N=3", d)
	}
}

func testReadYourWrites(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("ryw")
	c.run(func(ctx context.Context, tx idem.Tx) error {
		get := func(what string) (contractDoc, idem.Version) {
			t.Helper()
			var d contractDoc
			v, err := tx.Get(ctx, k, &d)
			if err != nil {
				t.Fatalf("Get after %s in the same tx: %v", what, err)
			}
			return d, v
		}
		if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Get before any write: %v, want ErrNotFound", err)
		}
		wantErr(t, "Create", tx.Create(ctx, k, contractDoc{N: 1}), nil)
		d1, v1 := get("Create")
		wantErr(t, "second Create in the same tx", tx.Create(ctx, k, contractDoc{N: 9}), idem.ErrExists)
		wantErr(t, "Put", tx.Put(ctx, k, contractDoc{N: 2}), nil)
		d2, v2 := get("Put")
		wantErr(t, "Update at the Create's version", tx.Update(ctx, k, v1, contractDoc{N: 9}), idem.ErrConflict)
		wantErr(t, "Update", tx.Update(ctx, k, v2, contractDoc{N: 3}), nil)
		d3, v3 := get("Update")
		if d1.N != 1 || d2.N != 2 || d3.N != 3 || v1 == 0 || v1 == v2 || v2 == v3 || v1 == v3 {
			t.Fatalf("reads in the tx: %+v@%d, %+v@%d, %+v@%d", d1, v1, d2, v2, d3, v3)
		}
		wantErr(t, "Delete at the Put's version", tx.Delete(ctx, k, v2), idem.ErrConflict)
		wantErr(t, "Delete", tx.Delete(ctx, k, v3), nil)
		if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Get after Delete in the same tx: %v, want ErrNotFound", err)
		}
		wantErr(t, "Update after Delete", tx.Update(ctx, k, v3, contractDoc{N: 9}), idem.ErrNotFound)
		wantErr(t, "Delete after Delete", tx.Delete(ctx, k, 0), idem.ErrNotFound)
		wantErr(t, "Create after Delete", tx.Create(ctx, k, contractDoc{N: 4}), nil)
		d4, _ := get("Create after Delete")
		if d4.N != 4 {
			t.Fatalf("Get after re-Create = %+v, want N=4", d4)
		}
		return nil
	})
	if d, _ := c.mustGet(k); d.N != 4 {
		t.Fatalf("committed document %+v, want N=4", d)
	}
}

func testAtomicity(t *testing.T, h Harness) {
	c := newContract(t, h)
	keys := []idem.Key{ckey("m1"), ckey("m2"), {Collection: "contract.other", ID: "m3"}}
	write := func(ctx context.Context, tx idem.Tx) error {
		for i, k := range keys {
			if err := tx.Create(ctx, k, contractDoc{N: i + 1}); err != nil {
				return err
			}
		}
		return nil
	}
	errFn := errors.New("fails after three writes")
	err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if err := write(ctx, tx); err != nil {
			return err
		}
		return errFn
	})
	wantErr(t, "Run", err, errFn)
	for _, k := range keys {
		c.mustAbsent(k)
	}
	c.run(write)
	for i, k := range keys {
		if d, _ := c.mustGet(k); d.N != i+1 {
			t.Fatalf("Get(%s) = %+v, want N=%d", k, d, i+1)
		}
	}
}

func testExpiry(t *testing.T, h Harness) {
	c := newContract(t, h)
	k, forever := ckey("exp"), ckey("forever")
	now := c.clock.Now()
	wantErr(t, "Create with expiry", c.create(k, contractDoc{N: 1}, backend.WithExpiry(now.Add(10*time.Second))), nil)
	wantErr(t, "Create without expiry", c.create(forever, contractDoc{N: 1}), nil)
	_, v1 := c.mustGet(k)

	c.clock.Advance(9 * time.Second)
	c.mustGet(k)
	wantErr(t, "Create over a live document", c.create(k, contractDoc{N: 9}), idem.ErrExists)

	c.clock.Advance(2 * time.Second)
	c.mustAbsent(k)
	wantErr(t, "Update on expired", c.update(k, v1, contractDoc{N: 2}), idem.ErrNotFound)
	wantErr(t, "Delete on expired", c.delete(k, 0), idem.ErrNotFound)
	c.mustAbsent(k)

	// Create over an expired document replaces it, with a new version and
	// without the old expiry.
	wantErr(t, "Create over expired", c.create(k, contractDoc{N: 3}), nil)
	d, v2 := c.mustGet(k)
	if d.N != 3 || v2 == v1 {
		t.Fatalf("after Create over expired: %+v@%d (old version %d)", d, v2, v1)
	}
	c.clock.Advance(1000 * time.Hour)
	if d, _ := c.mustGet(k); d.N != 3 {
		t.Fatalf("document without expiry: %+v", d)
	}
	if d, _ := c.mustGet(forever); d.N != 1 {
		t.Fatalf("document without expiry: %+v", d)
	}

	// Update and Put set (or clear) the expiry of the version they write.
	_, v := c.mustGet(k)
	now = c.clock.Now()
	wantErr(t, "Update with expiry", c.update(k, v, contractDoc{N: 4}, backend.WithExpiry(now.Add(time.Minute))), nil)
	c.clock.Advance(30 * time.Second)
	_, v = c.mustGet(k)
	wantErr(t, "Update extending expiry", c.update(k, v, contractDoc{N: 5}, backend.WithExpiry(now.Add(time.Hour))), nil)
	c.clock.Advance(time.Minute)
	if d, _ := c.mustGet(k); d.N != 5 {
		t.Fatalf("after extending expiry: %+v", d)
	}
	wantErr(t, "Put without expiry", c.put(k, contractDoc{N: 6}), nil)
	c.clock.Advance(2 * time.Hour)
	if d, _ := c.mustGet(k); d.N != 6 {
		t.Fatalf("Put without expiry kept the old expiry: %+v", d)
	}

	// A write whose expiry is already past is stored expired.
	past := ckey("past")
	wantErr(t, "Put expired", c.put(past, contractDoc{N: 1}, backend.WithExpiry(c.clock.Now().Add(-time.Second))), nil)
	c.mustAbsent(past)
	wantErr(t, "Create over an expired Put", c.create(past, contractDoc{N: 2}), nil)
	if d, _ := c.mustGet(past); d.N != 2 {
		t.Fatalf("Get(past) = %+v, want N=2", d)
	}
}

func testExpiryBoundary(t *testing.T, h Harness) {
	c := newContract(t, h)
	at, before := ckey("at"), ckey("before")
	now := c.clock.Now()
	wantErr(t, "Put expiring now", c.put(at, contractDoc{N: 1}, backend.WithExpiry(now)), nil)
	wantErr(t, "Put expiring in a second", c.put(before, contractDoc{N: 1}, backend.WithExpiry(now.Add(time.Second))), nil)
	c.mustAbsent(at)
	c.mustGet(before)
	c.clock.Advance(time.Second)
	c.mustAbsent(before)
	wantErr(t, "Create at the boundary", c.create(before, contractDoc{N: 2}), nil)
	if d, _ := c.mustGet(before); d.N != 2 {
		t.Fatalf("Get after Create = %+v, want N=2", d)
	}
}

// sized returns a document whose JSON encoding is exactly n bytes.
func sized(n int) string { return strings.Repeat("a", n-2) }

func testLimits(t *testing.T, h Harness) {
	c := newContract(t, h)
	max := h.MaxDocumentBytes
	k, small := ckey("big"), ckey("small")

	wantErr(t, "Create of MaxDocumentBytes+1", c.create(k, sized(max+1)), idem.ErrTooLarge)
	c.mustAbsent(k)
	wantErr(t, "Put of MaxDocumentBytes+1", c.put(k, sized(max+1)), idem.ErrTooLarge)
	c.mustAbsent(k)

	readLen := func(k idem.Key) (int, idem.Version) {
		t.Helper()
		var s string
		var v idem.Version
		wantErr(t, "Get", c.op(func(ctx context.Context, tx idem.Tx) error {
			var err error
			v, err = tx.Get(ctx, k, &s)
			return err
		}), nil)
		return len(s) + 2, v
	}
	wantErr(t, "Create of MaxDocumentBytes", c.create(k, sized(max)), nil)
	if n, _ := readLen(k); n != max {
		t.Fatalf("stored document is %d bytes, want %d", n, max)
	}
	wantErr(t, "Put of MaxDocumentBytes", c.put(k, sized(max)), nil)
	_, v := readLen(k)
	wantErr(t, "Update of MaxDocumentBytes", c.update(k, v, sized(max)), nil)
	_, v = readLen(k)

	wantErr(t, "Create", c.create(small, "abc"), nil)
	_, vs := readLen(small)
	wantErr(t, "Put of MaxDocumentBytes+1 over a document", c.put(small, sized(max+1)), idem.ErrTooLarge)
	wantErr(t, "Update to MaxDocumentBytes+1", c.update(small, vs, sized(max+1)), idem.ErrTooLarge)
	if n, v := readLen(small); n != 5 || v != vs {
		t.Fatalf("failed writes changed the document: %d bytes at version %d, want 5 at %d", n, v, vs)
	}
	if _, v2 := readLen(k); v2 != v {
		t.Fatalf("version of the large document changed")
	}
}

func testLimitRollsBackTx(t *testing.T, h Harness) {
	c := newContract(t, h)
	first, big := ckey("first"), ckey("big")
	err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, first, contractDoc{N: 1}); err != nil {
			return err
		}
		return tx.Put(ctx, big, sized(h.MaxDocumentBytes+1))
	})
	wantErr(t, "Run whose fn returns ErrTooLarge", err, idem.ErrTooLarge)
	c.mustAbsent(first)
	c.mustAbsent(big)
}

func testSweep(t *testing.T, h Harness) {
	if !h.Sweeper {
		t.Skip("the harness declares no backend.Sweeper")
	}
	c := newContract(t, h)
	sw := capability[backend.Sweeper](t, c.s)
	now := c.clock.Now()
	// Five documents expire by now+10s (one exactly then), three do not.
	for i := range 5 {
		exp := now.Add(time.Duration(i*2+2) * time.Second)
		wantErr(t, "Put expiring", c.put(ckey(fmt.Sprintf("gone%d", i)), contractDoc{N: i}, backend.WithExpiry(exp)), nil)
	}
	live := []idem.Key{ckey("live0"), ckey("live1"), ckey("live2")}
	wantErr(t, "Put", c.put(live[0], contractDoc{N: 1}), nil)
	wantErr(t, "Put", c.put(live[1], contractDoc{N: 2}, backend.WithExpiry(now.Add(11*time.Second))), nil)
	wantErr(t, "Put", c.put(live[2], contractDoc{N: 3}, backend.WithExpiry(now.Add(time.Hour))), nil)

	n, err := sw.Sweep(t.Context(), 10)
	wantErr(t, "Sweep before anything expired", err, nil)
	if n != 0 {
		t.Fatalf("Sweep before anything expired deleted %d", n)
	}
	if n, err := sw.Sweep(t.Context(), 0); err == nil && n != 0 {
		t.Fatalf("Sweep with limit 0 deleted %d", n)
	}

	c.clock.Advance(10 * time.Second)
	total := 0
	for _, want := range []int{2, 2, 1, 0} {
		n, err := sw.Sweep(t.Context(), 2)
		wantErr(t, "Sweep", err, nil)
		if n != want {
			t.Fatalf("Sweep(limit 2) deleted %d, want %d (after %d)", n, want, total)
		}
		total += n
	}
	for i, k := range live {
		if d, _ := c.mustGet(k); d.N != i+1 {
			t.Fatalf("Get(%s) = %+v after Sweep, want N=%d", k, d, i+1)
		}
	}
	// A swept key is absent and free for Create.
	wantErr(t, "Create over a swept key", c.create(ckey("gone0"), contractDoc{N: 7}), nil)
}
