package kit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// source is a committed state for a Buffer, counting its reads.
type source struct {
	docs  map[backend.Key]kit.Doc
	reads int
	last  backend.Version
}

func (s *source) ReadDoc(ctx context.Context, k backend.Key) (kit.Doc, error) {
	s.reads++
	return s.docs[k], nil
}

func (s *source) NextVersion(k backend.Key, read backend.Version) backend.Version {
	s.last = max(s.last, read) + 1
	return s.last
}

var now = time.Unix(1000, 0)

func newBuffer(src *source, m kit.Mode) *kit.Buffer {
	b := new(kit.Buffer)
	b.Init("test", src, kit.Options{Now: func() time.Time { return now }, MaxDocumentBytes: 1 << 10}, m)
	return b
}

// Without Snapshot, every look reads the committed state again, and a
// conditional write meets a concurrent commit at once; the first read is
// the one kept for the commit.
func TestBufferReadsAgain(t *testing.T) {
	k := backend.Key{Collection: "c", ID: "1"}
	src := &source{docs: map[backend.Key]kit.Doc{k: {Version: 7, Data: []byte(`"a"`)}}, last: 7}
	b := newBuffer(src, kit.Mode{})
	ctx := context.Background()
	if v, err := b.Get(ctx, k, nil); v != 7 || err != nil {
		t.Fatalf("Get = %d, %v; want 7", v, err)
	}
	src.docs[k] = kit.Doc{Version: 9, Data: []byte(`"b"`)} // committed by another transaction
	var got string
	if v, err := b.Get(ctx, k, &got); v != 9 || err != nil || got != "b" || src.reads != 2 {
		t.Errorf("second Get = %d %q, %v after %d reads; want the new commit, read again", v, got, err, src.reads)
	}
	if err := b.Update(ctx, k, 7, "c"); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("Update at the version first read = %v, want ErrConflict", err)
	}
	if r := b.ReadOf(k); r == nil || r.Version != 7 || len(b.Reads()) != 1 {
		t.Errorf("reads: %+v, want the first, at 7", b.Reads())
	}
}

func TestBufferSnapshot(t *testing.T) {
	k := backend.Key{Collection: "c", ID: "1"}
	src := &source{docs: map[backend.Key]kit.Doc{k: {Version: 7, Data: []byte(`"a"`)}}, last: 7}
	b := newBuffer(src, kit.Mode{Snapshot: true})
	ctx := context.Background()
	var got string
	if v, err := b.Get(ctx, k, &got); v != 7 || err != nil || got != "a" {
		t.Fatalf("Get = %d %q, %v; want 7 \"a\"", v, got, err)
	}
	src.docs[k] = kit.Doc{Version: 9, Data: []byte(`"b"`)} // committed by another transaction
	if v, err := b.Get(ctx, k, &got); v != 7 || err != nil || got != "a" || src.reads != 1 {
		t.Errorf("second Get = %d %q, %v after %d reads; want what the first saw, one read", v, got, err, src.reads)
	}
	if err := b.Update(ctx, k, 9, "c"); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("Update at a version the tx did not see = %v, want ErrConflict", err)
	}
	if err := b.Update(ctx, k, 7, "c"); err != nil {
		t.Fatal(err)
	}
	w := b.WriteOf(k)
	if w == nil || string(w.Data) != `"c"` || w.Version <= 7 {
		t.Fatalf("write after Update: %+v, want \"c\" at a version past 7", w)
	}
	if r := b.ReadOf(k); r == nil || r.Version != 7 || len(b.Reads()) != 1 {
		t.Errorf("reads: %+v, want the one read at 7", b.Reads())
	}
	if err := b.Delete(ctx, k, 7); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("Delete at the version before the tx's own Update = %v, want ErrConflict", err)
	}
	if err := b.Delete(ctx, k, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, k, nil); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get after the tx's Delete = %v, want ErrNotFound", err)
	}
	if ws := b.Writes(); len(ws) != 1 || ws[0].Data != nil {
		t.Errorf("writes: %+v, want one delete", ws)
	}
}

func TestBufferExpiry(t *testing.T) {
	k := backend.Key{Collection: "c", ID: "1"}
	src := &source{docs: map[backend.Key]kit.Doc{k: {Version: 3, Data: []byte(`1`), ExpiresAt: now}}, last: 3}
	b := newBuffer(src, kit.Mode{})
	ctx := context.Background()
	if _, err := b.Get(ctx, k, nil); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get of a document expiring now = %v, want ErrNotFound", err)
	}
	if err := b.Create(ctx, k, 2, backend.WithExpiry(now.Add(time.Second))); err != nil {
		t.Errorf("Create over an expired document = %v", err)
	}
	if w := b.WriteOf(k); w == nil || !w.ExpiresAt.Equal(now.Add(time.Second)) || w.AtCommit {
		t.Errorf("write: %+v, want the expiry, checked now", w)
	}
	if err := b.Create(ctx, k, 3); !errors.Is(err, backend.ErrExists) {
		t.Errorf("second Create = %v, want ErrExists", err)
	}
}

func TestBufferCreateAtCommit(t *testing.T) {
	live := backend.Key{Collection: "c", ID: "live"}
	absent := backend.Key{Collection: "c", ID: "absent"}
	src := &source{docs: map[backend.Key]kit.Doc{live: {Version: 5, Data: []byte(`1`)}}, last: 5}
	ctx := context.Background()

	// Without DeferCreates, CreateAtCommit checks at once.
	b := newBuffer(src, kit.Mode{})
	if err := b.Create(ctx, live, 2, backend.CreateAtCommit()); !errors.Is(err, backend.ErrExists) {
		t.Errorf("CreateAtCommit checked at once = %v, want ErrExists", err)
	}

	// With it, an unread key is not read: the write is left to the commit.
	b = newBuffer(src, kit.Mode{DeferCreates: true})
	src.reads = 0
	if err := b.Create(ctx, live, 2, backend.CreateAtCommit()); err != nil {
		t.Fatalf("deferred Create = %v", err)
	}
	if w := b.WriteOf(live); w == nil || !w.AtCommit || src.reads != 0 {
		t.Fatalf("deferred Create: write %+v after %d reads, want AtCommit and no read", w, src.reads)
	}
	// A Get of it reads the key: a live document fails the attempt.
	if _, err := b.Get(ctx, live, nil); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("Get after a deferred Create over a live document = %v, want ErrConflict", err)
	}
	// Over an absent one, the Get sees the Create, now checked.
	if err := b.Create(ctx, absent, 2, backend.CreateAtCommit()); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, absent, nil); err != nil || v == 0 {
		t.Errorf("Get after a deferred Create over nothing = %d, %v", v, err)
	}
	if w := b.WriteOf(absent); w == nil || w.AtCommit || !w.Observed {
		t.Errorf("write after its Get: %+v, want checked and observed", w)
	}
}

func TestBufferClosed(t *testing.T) {
	k := backend.Key{Collection: "c", ID: "1"}
	b := newBuffer(&source{}, kit.Mode{})
	b.Close()
	ctx := context.Background()
	if _, err := b.Get(ctx, k, nil); err == nil {
		t.Error("Get after Close succeeded")
	}
	if err := b.Put(ctx, k, 1); err == nil || len(b.Writes()) != 0 {
		t.Errorf("Put after Close = %v, %d writes; want an error and none", err, len(b.Writes()))
	}
}

func TestBufferManyKeys(t *testing.T) {
	// Past eight keys the lists index their items: every key is still
	// found, in the order first written.
	src := &source{docs: map[backend.Key]kit.Doc{}}
	b := newBuffer(src, kit.Mode{})
	ctx := context.Background()
	for i := range 20 {
		k := backend.Key{Collection: "c", ID: string(rune('a' + i))}
		if err := b.Create(ctx, k, i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		k := backend.Key{Collection: "c", ID: string(rune('a' + i))}
		var got int
		if _, err := b.Get(ctx, k, &got); err != nil || got != i {
			t.Errorf("Get(%s) = %d, %v; want %d", k, got, err, i)
		}
		if b.Writes()[i].Key != k || b.Reads()[i].Key != k {
			t.Errorf("item %d is %s / %s, want %s", i, b.Writes()[i].Key, b.Reads()[i].Key, k)
		}
	}
}
