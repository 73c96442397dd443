package storeurl_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/storeurl"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	"github.com/idemkit/sdk/internal/storeurl/storeurltest"
)

// Every kind opens, runs a write and reads it back.
func TestOpenEveryKind(t *testing.T) {
	for _, name := range storeurltest.Names {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, done, err := storeurl.Open(ctx, storeurltest.Fresh(t, name))
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			key := idem.Key{Collection: "things", ID: "a"}
			if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				return tx.Create(ctx, key, map[string]int{"n": 1})
			}); err != nil {
				t.Fatal(err)
			}
			var got map[string]int
			if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				_, err := tx.Get(ctx, key, &got)
				return err
			}); err != nil || got["n"] != 1 {
				t.Fatalf("read back %v, %v", got, err)
			}
		})
	}
}

// A bad value is refused with the grammar, and a password in it is not
// repeated.
func TestOpenRefusesBadValues(t *testing.T) {
	for _, spec := range []string{"", "nothing", "mysql://u:secret@h/db", "sqlite:", "dynamodb://?endpoint=x", "firestore://"} {
		_, _, err := storeurl.Open(context.Background(), spec)
		if err == nil {
			t.Errorf("%q opened", spec)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: error quotes the password: %v", spec, err)
		}
	}
}

// Usage names every kind the package opens, as the kinds registered say.
func TestUsageListsEveryKind(t *testing.T) {
	want := strings.Split(storekind.Usage(), " | ")
	got := strings.Split(storeurl.Usage, " | ")
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Usage lists %q, the linked kinds are %q", got, want)
	}
	for _, name := range storeurltest.Names {
		if !storekind.Linked(name) {
			t.Errorf("%s is not linked", name)
		}
	}
}

// Options.SweepEvery paces the background sweep of every kind that has
// one: a document that expires after the sweep's first round is deleted
// within a second of expiring under a pace of 100 ms. The default pace
// makes its rounds about 1 s, 3 s and 7 s after opening.
func TestSweepEvery(t *testing.T) {
	for _, name := range []string{"memory", "sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s, done, err := storeurl.OpenWith(ctx, storeurltest.Fresh(t, name), storeurl.Options{SweepEvery: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			sw, ok := s.(backend.Sweeper)
			if !ok {
				t.Fatalf("%T does not sweep", s)
			}
			expires := time.Now().Add(1200 * time.Millisecond)
			if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				return tx.Put(ctx, idem.Key{Collection: "answers", ID: "a"}, map[string]int{"n": 1}, backend.WithExpiry(expires))
			}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(expires.Add(time.Second)))
			if n, err := sw.Sweep(ctx, 10); err != nil || n != 0 {
				t.Fatalf("a second after expiring, a sweep deleted %d document(s) (%v): want 0, the background sweep's work", n, err)
			}
		})
	}
}
