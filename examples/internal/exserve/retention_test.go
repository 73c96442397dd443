package exserve

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// -ttl and -sweep-every default to the Guard's TTL and the stores' pace,
// take a duration, and are in -h.
func TestRetentionFlags(t *testing.T) {
	f, _, err := parse()
	if err != nil || f.TTL != 24*time.Hour || f.SweepEvery != time.Minute {
		t.Fatalf("defaults: -ttl %v, -sweep-every %v, %v; want 24h and 1m", f.TTL, f.SweepEvery, err)
	}
	f, _, err = parse("-ttl", "90s", "-sweep-every", "250ms")
	if err != nil || f.TTL != 90*time.Second || f.SweepEvery != 250*time.Millisecond {
		t.Fatalf("-ttl 90s -sweep-every 250ms: %v, %v, %v", f.TTL, f.SweepEvery, err)
	}
	_, help, _ := parse("-h")
	for _, want := range []string{"-ttl duration", "(default 24h0m0s)", "-sweep-every duration", "(default 1m0s)"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
}

// A -ttl or -sweep-every that is not positive is refused before anything
// opens, naming the flag.
func TestRetentionFlagsRefuse(t *testing.T) {
	for _, args := range [][]string{
		{"-ttl", "0"},
		{"-ttl", "-1h"},
		{"-sweep-every", "0s"},
		{"-sweep-every", "-1m"},
	} {
		_, _, err := parse(args...)
		if err == nil || !strings.Contains(err.Error(), args[0]+" must be above zero") {
			t.Errorf("%q: %v, want a refusal naming %s", args, err, args[0])
		}
	}
}

// -sweep-every reaches the store OpenStore opens: a document that expires
// after the sweep's first round is deleted by the background sweep within
// the pace, where the default pace would wait two seconds more.
func TestSweepEveryReachesTheStore(t *testing.T) {
	for _, store := range []string{"memory:", "sqlite:" + filepath.Join(t.TempDir(), "sweep.db")} {
		kind, _, _ := strings.Cut(store, ":")
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f, _, err := parse("-store", store, "-sweep-every", "100ms")
			if err != nil {
				t.Fatal(err)
			}
			s, done, err := f.OpenStore(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), "ex")
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			if left := sweptWithin(t, s, 1200*time.Millisecond, time.Second); left != 0 {
				t.Fatalf("%d expired document(s) left a second after expiring under -sweep-every 100ms", left)
			}
		})
	}
}

// sweptWithin writes a document that expires after expiry, waits until
// within has passed since then, and returns how many expired documents the
// store's background sweep left: a manual sweep's count.
//
// A store's sweep makes its first round after a second (or its pace, if
// shorter) and, finding nothing, waits twice as long each time, up to its
// pace: with the default pace of a minute its rounds come at about 1 s,
// 3 s and 7 s after opening.
func sweptWithin(t *testing.T, s idem.Store, expiry, within time.Duration) int {
	t.Helper()
	sw, ok := s.(backend.Sweeper)
	if !ok {
		t.Fatalf("%T does not sweep", s)
	}
	ctx := t.Context()
	expires := time.Now().Add(expiry)
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Put(ctx, idem.Key{Collection: "answers", ID: "a"}, map[string]int{"n": 1}, backend.WithExpiry(expires))
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(expires.Add(within)))
	n, err := sw.Sweep(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
