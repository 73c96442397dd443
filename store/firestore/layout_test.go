package firestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	fs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	idemfs "github.com/idemkit/sdk/store/firestore"
)

// Every valid key is storable, at a path of its own, under its owner's
// document when it has one.
func TestLayout(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	var keys []idem.Key
	for _, id := range []string{".", "..", "...", "__x__", "__", "_a", "%", "%2E", "%.", "%%", ".a", "a.", "a__b__", "é ü"} {
		keys = append(keys, idem.Key{Collection: "c", ID: id}, idem.Key{Owner: id, Collection: "c", ID: "x"})
	}
	for _, c := range []string{".", "..", "__c__", "_c"} {
		keys = append(keys, idem.Key{Collection: c, ID: "x"}, idem.Key{Owner: "u", Collection: c, ID: "x"})
	}
	paths := map[string]idem.Key{}
	for i, k := range keys {
		p := s.Doc(k).Path
		if prev, dup := paths[p]; dup {
			t.Fatalf("%v and %v share the path %s", prev, k, p)
		}
		paths[p] = k
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, i) }); err != nil {
			t.Fatalf("Create(%v) at %s: %v", k, p, err)
		}
	}
	for i, k := range keys {
		var got int
		if _, err := s.Read(ctx, k, &got); err != nil || got != i {
			t.Fatalf("Read(%v) = %d, %v; want %d", k, got, err, i)
		}
	}
	// An owner's keys are under the owner's document.
	owned := s.Doc(idem.Key{Owner: "uid1", Collection: "idem_ops", ID: "h"})
	if p := owned.Parent.Parent; p == nil || p.ID != "uid1" || p.Parent.ID != s.Doc(idem.Key{Owner: "u", Collection: "c", ID: "x"}).Parent.Parent.Parent.ID {
		t.Fatalf("op record at %s, want under the owner's document", owned.Path)
	}
}

// The default layout is users/{uid}/{collection}/{id}: a server whose users
// already live there adopts their documents as they are.
func TestDefaultLayout(t *testing.T) {
	s, err := idemfs.New(newClient(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Doc(idem.Key{Owner: "uid1", Collection: "idem_ops", ID: "h"}).Path
	if want := "projects/" + project + "/databases/(default)/documents/users/uid1/idem_ops/h"; got != want {
		t.Fatalf("path %s, want %s", got, want)
	}
	if got := s.Doc(idem.Key{Collection: "posts", ID: "p"}).Path; got != "projects/"+project+"/databases/(default)/documents/posts/p" {
		t.Fatalf("path %s, want .../posts/p", got)
	}
}

// As gives fn the Firestore transaction: a document of the app's own,
// written through it, commits with the Tx's writes, or not at all.
func TestAsWritesInTheSameTransaction(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	k := idem.Key{Owner: "uid1", Collection: "idem_ops", ID: "op1"}
	profile := s.Doc(k).Parent.Parent // users/uid1, the app's own document
	errFail := errors.New("handler failed")
	for _, fail := range []bool{true, false} {
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			var ftx *fs.Transaction
			if !tx.As(&ftx) {
				return errors.New("As(**firestore.Transaction) = false")
			}
			// Reads before writes, as Firestore requires.
			if _, err := ftx.Get(profile); err != nil && status.Code(err) != codes.NotFound {
				return err
			}
			if err := ftx.Set(profile, map[string]any{"name": "Ada", "stops": 1}); err != nil {
				return err
			}
			// As the middleware writes its op record after the handler:
			// a Create sent with the commit reads nothing, so it may
			// follow the native write.
			if err := tx.Create(ctx, k, map[string]string{"result": "ok"}, backend.CreateAtCommit()); err != nil {
				return err
			}
			if fail {
				return errFail
			}
			return nil
		})
		if fail {
			if !errors.Is(err, errFail) {
				t.Fatalf("Run = %v, want the handler's error", err)
			}
			if snap, err := profile.Get(ctx); err == nil || snap.Exists() {
				t.Fatal("the app's document was written by a failed Run")
			}
			if _, err := s.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("op record after a failed Run: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	snap, err := profile.Get(ctx)
	if err != nil || snap.Data()["name"] != "Ada" {
		t.Fatalf("the app's document: %v, %v", snap.Data(), err)
	}
	if _, err := s.Read(ctx, k, nil); err != nil {
		t.Fatalf("op record: %v", err)
	}
}

// The expiry is a timestamp field, for a TTL policy; Get treats an expired
// document as absent before Firestore deletes it.
func TestExpiryField(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := newStore(t, &idemfs.Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	k := idem.Key{Owner: "u", Collection: "idem_ops", ID: "x"}
	exp := now.Add(time.Hour)
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, 1, backend.WithExpiry(exp))
	}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Doc(k).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := snap.Data()[idemfs.FieldExpiresAt].(time.Time); !ok || !got.Equal(exp) {
		t.Fatalf("%s = %v, want the timestamp %v", idemfs.FieldExpiresAt, snap.Data()[idemfs.FieldExpiresAt], exp)
	}
	now = exp
	if _, err := s.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Read at the expiry: %v, want ErrNotFound", err)
	}
}

// More writes than a commit takes fail before anything is sent.
func TestTooManyWrites(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for i := range idemfs.MaxWrites + 1 {
			if err := tx.Put(ctx, idem.Key{Collection: "many", ID: fmt.Sprint(i)}, i); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Run with %d writes = %v, want ErrTooLarge", idemfs.MaxWrites+1, err)
	}
	if _, err := s.Read(ctx, idem.Key{Collection: "many", ID: "0"}, nil); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("a write of the refused Run: %v", err)
	}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for i := range idemfs.MaxWrites {
			if err := tx.Put(ctx, idem.Key{Collection: "many", ID: fmt.Sprint(i)}, i); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("Run with %d writes: %v", idemfs.MaxWrites, err)
	}
}
