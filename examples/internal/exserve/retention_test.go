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
// and -max-stored-bytes to 64 MiB; 0 turns the bound off; all three are
// in -h.
func TestRetentionFlags(t *testing.T) {
	f, _, err := parse()
	if err != nil || f.TTL != 24*time.Hour || f.SweepEvery != time.Minute || f.MaxStoredBytes != 64<<20 {
		t.Fatalf("defaults: -ttl %v, -sweep-every %v, -max-stored-bytes %d, %v; want 24h, 1m and 67108864", f.TTL, f.SweepEvery, f.MaxStoredBytes, err)
	}
	f, _, err = parse("-ttl", "90s", "-sweep-every", "250ms", "-max-stored-bytes", "1000000")
	if err != nil || f.TTL != 90*time.Second || f.SweepEvery != 250*time.Millisecond || f.MaxStoredBytes != 1_000_000 {
		t.Fatalf("-ttl 90s -sweep-every 250ms -max-stored-bytes 1000000: %v, %v, %d, %v", f.TTL, f.SweepEvery, f.MaxStoredBytes, err)
	}
	if f, _, err = parse("-max-stored-bytes", "0"); err != nil || f.MaxStoredBytes != 0 {
		t.Fatalf("-max-stored-bytes 0 (no bound): %d, %v", f.MaxStoredBytes, err)
	}
	_, help, _ := parse("-h")
	for _, want := range []string{"-ttl duration", "(default 24h0m0s)", "-sweep-every duration", "(default 1m0s)",
		"-max-stored-bytes int", "quota_exceeded", "when to retry", "(default 67108864)"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
}

// A -ttl or -sweep-every that is not positive, or a negative
// -max-stored-bytes, is refused before anything opens, naming the flag.
func TestRetentionFlagsRefuse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-ttl", "0"}, "-ttl must be above zero"},
		{[]string{"-ttl", "-1h"}, "-ttl must be above zero"},
		{[]string{"-sweep-every", "0s"}, "-sweep-every must be above zero"},
		{[]string{"-sweep-every", "-1m"}, "-sweep-every must be above zero"},
		{[]string{"-max-stored-bytes", "-1"}, "-max-stored-bytes must not be negative"},
		{[]string{"-max-stored-bytes", "-4096"}, "-max-stored-bytes must not be negative"},
	} {
		_, _, err := parse(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a refusal naming %s", c.args, err, c.args[0])
		} else if c.args[0] == "-max-stored-bytes" && strings.Contains(err.Error(), strings.TrimPrefix(c.args[1], "-")) {
			t.Errorf("%q: the refusal %q repeats the value", c.args, err)
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
