package kit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

func TestResolve(t *testing.T) {
	now := func() time.Time { return time.Unix(1, 0) }
	def := kit.Options{Now: time.Now, MaxDocumentBytes: 100, MaxAttempts: 8}
	got, err := kit.Options{}.Resolve("test", def)
	if err != nil || got.Now == nil || got.MaxDocumentBytes != 100 || got.MaxAttempts != 8 {
		t.Errorf("zero options: %+v, %v; want the defaults", got, err)
	}
	got, err = kit.Options{Now: now, MaxDocumentBytes: 5, MaxAttempts: 1}.Resolve("test", def)
	if err != nil || !got.Now().Equal(now()) || got.MaxDocumentBytes != 5 || got.MaxAttempts != 1 {
		t.Errorf("set options: %+v, %v; want them kept", got, err)
	}
	for _, c := range []struct {
		name string
		o    kit.Options
	}{
		{"MaxDocumentBytes", kit.Options{MaxDocumentBytes: -1}},
		{"MaxAttempts", kit.Options{MaxAttempts: -1}},
	} {
		_, err := c.o.Resolve("test", def)
		if err == nil || !strings.Contains(err.Error(), "test: Options."+c.name+" may not be negative") {
			t.Errorf("negative %s: %v, want an error naming it", c.name, err)
		}
	}
}

func TestDefault(t *testing.T) {
	if d, err := kit.Default("test", "Wait", time.Duration(0), time.Second); d != time.Second || err != nil {
		t.Errorf("Default(0) = %v, %v; want the default", d, err)
	}
	if d, err := kit.Default("test", "Wait", time.Millisecond, time.Second); d != time.Millisecond || err != nil {
		t.Errorf("Default(1ms) = %v, %v; want 1ms", d, err)
	}
	if _, err := kit.Default("test", "Wait", -time.Millisecond, time.Second); err == nil {
		t.Error("Default(-1ms) accepted")
	}
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	r := kit.Retry{Store: "test", MaxAttempts: 4, Base: time.Microsecond, Cap: time.Microsecond}
	errOther := errors.New("other")

	n := 0
	err := r.Do(ctx, func() error {
		if n++; n < 3 {
			return backend.ErrConflict
		}
		return nil
	}, kit.OnConflict)
	if err != nil || n != 3 {
		t.Errorf("two conflicts then success: %v after %d attempts, want nil after 3", err, n)
	}

	n = 0
	err = r.Do(ctx, func() error { n++; return errOther }, kit.OnConflict)
	if err != errOther || n != 1 {
		t.Errorf("another error: %v after %d attempts, want it after 1", err, n)
	}

	n = 0
	err = r.Do(ctx, func() error { n++; return errOther }, func(error) kit.Next { return kit.Again })
	if !errors.Is(err, backend.ErrConflict) || !errors.Is(err, errOther) || n != 4 {
		t.Errorf("retried to the end: %v after %d attempts, want ErrConflict and the last error after 4", err, n)
	}

	// AgainNow goes without waiting: a backoff would end the cancelled
	// context's Do.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	slow := kit.Retry{Store: "test", MaxAttempts: 3, Base: time.Hour, Cap: time.Hour}
	n = 0
	err = slow.Do(cancelled, func() error { n++; return backend.ErrConflict }, func(error) kit.Next { return kit.AgainNow })
	if n != 3 || !errors.Is(err, backend.ErrConflict) {
		t.Errorf("AgainNow: %v after %d attempts, want 3 attempts", err, n)
	}
	n = 0
	err = slow.Do(cancelled, func() error { n++; return backend.ErrConflict }, kit.OnConflict)
	if n != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, backend.ErrConflict) {
		t.Errorf("Again with ctx cancelled: %v after %d attempts, want ctx's error and the attempt's after 1", err, n)
	}
}

func TestGate(t *testing.T) {
	var g kit.Gate
	k := backend.Key{Collection: "c", ID: "1"}
	if err := g.Check(backend.Key{Collection: "C", ID: "1"}); !errors.Is(err, backend.ErrInvalidKey) {
		t.Errorf("Check(invalid key) = %v, want ErrInvalidKey", err)
	}
	if _, err := g.CheckWrite(k, strings.Repeat("x", 10), 5); !errors.Is(err, backend.ErrTooLarge) {
		t.Errorf("CheckWrite(10-byte document, limit 5) = %v, want ErrTooLarge", err)
	}
	if b, err := g.CheckWrite(k, "x", 5); err != nil || string(b) != `"x"` {
		t.Errorf("CheckWrite = %q, %v", b, err)
	}
	g.Close()
	if !g.Closed() || g.Err() == nil || g.Check(k) == nil {
		t.Error("a closed Gate passes its checks")
	}
	if _, err := g.CheckWrite(k, "x", 5); err == nil {
		t.Error("CheckWrite on a closed Gate succeeded")
	}
}
