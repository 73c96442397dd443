package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

type note struct {
	Text string `json:"text"`
}

// run runs fn in one transaction of s and fails the test on an error.
func run(t *testing.T, s *postgres.Store, fn func(ctx context.Context, tx idem.Tx) error) {
	t.Helper()
	if err := s.Run(context.Background(), fn); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// getIn reads k in a transaction of its own.
func getIn(t *testing.T, s *postgres.Store, k idem.Key) (note, idem.Version, error) {
	t.Helper()
	var n note
	var v idem.Version
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		v, err = tx.Get(ctx, k, &n)
		return err
	})
	return n, v, err
}

func TestRead(t *testing.T) {
	// The default mode reads through the prepared statement on the wire
	// connection; the others send the SQL through pgx.
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) { testRead(t, newPoolMode(t, 2, mode)) })
	}
}

func testRead(t *testing.T, pool *pgxpool.Pool) {
	clock := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, pool, &postgres.Options{Now: clock.Now})
	ctx := context.Background()
	live := idem.Key{Collection: "notes", ID: "live"}
	expiring := idem.Key{Collection: "notes", ID: "expiring"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, live, note{Text: "hello"}); err != nil {
			return err
		}
		return tx.Create(ctx, expiring, note{Text: "soon gone"}, backend.WithExpiry(clock.Now().Add(time.Minute)))
	})
	_, want, err := getIn(t, s, live)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Live", func(t *testing.T) {
		var n note
		v, err := s.Read(ctx, live, &n)
		if err != nil || v != want || n.Text != "hello" {
			t.Fatalf("Read = %v, %+v, %v; want version %v, text hello", v, n, err, want)
		}
		if v, err := s.Read(ctx, live, nil); err != nil || v != want {
			t.Fatalf("Read with nil dst = %v, %v; want version %v", v, err, want)
		}
	})
	t.Run("Absent", func(t *testing.T) {
		v, err := s.Read(ctx, idem.Key{Collection: "notes", ID: "none"}, &note{})
		if !errors.Is(err, idem.ErrNotFound) || v != 0 {
			t.Fatalf("Read of an absent key = %v, %v; want 0, ErrNotFound", v, err)
		}
	})
	t.Run("ExpiredByStoreClock", func(t *testing.T) {
		if _, err := s.Read(ctx, expiring, nil); err != nil {
			t.Fatalf("Read before the expiry: %v", err)
		}
		clock.Advance(time.Minute - time.Microsecond)
		if _, err := s.Read(ctx, expiring, nil); err != nil {
			t.Fatalf("Read 1 µs before the expiry: %v", err)
		}
		clock.Advance(time.Microsecond) // expiry == now: expired
		var n note
		v, err := s.Read(ctx, expiring, &n)
		if !errors.Is(err, idem.ErrNotFound) || v != 0 || n.Text != "" {
			t.Fatalf("Read at the expiry = %v, %+v, %v; want 0, nothing decoded, ErrNotFound", v, n, err)
		}
		if _, err := s.Read(ctx, live, nil); err != nil {
			t.Fatalf("a document without expiry after the clock moved: %v", err)
		}
	})
	t.Run("DecodeError", func(t *testing.T) {
		var wrong []int
		if _, err := s.Read(ctx, live, &wrong); err == nil {
			t.Fatal("Read into a []int of an object succeeded")
		}
	})
	t.Run("OpRecord", func(t *testing.T) {
		// The op record decodes itself (oprecord.Record.UnmarshalJSON),
		// from what jsonb gives back: escapes, non-ASCII, members in
		// jsonb's order.
		k := idem.Key{Collection: oprecord.Collection, ID: "op"}
		want := oprecord.Record{Scope: "ü \"s\"", Tool: "deposit", OpID: "op-1\n\t\u2028", Fingerprint: "f", ArgsHash: "h",
			Result:     json.RawMessage(`{"content":[{"type":"text","text":"<ok> \\ \"é\" \ud83d\ude00"}],"structuredContent":{"n":1.5}}`),
			OutputText: `{"n":1.5,"s":"\u00e9"}`, CommittedAt: time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC),
			ExpiresAt: time.Date(2030, 1, 2, 0, 0, 0, 0, time.FixedZone("", -7200)), Attempt: "a.1"}
		run(t, s, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, &want) })
		var got oprecord.Record
		if _, err := s.Read(ctx, k, &got); err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if _, err := s.Read(ctx, k, &raw); err != nil {
			t.Fatal(err)
		}
		type plain oprecord.Record
		var std oprecord.Record
		if err := json.Unmarshal(raw, (*plain)(&std)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("Read decoded\n%#v\nencoding/json decodes the same document as\n%#v", got, std)
		}
		if got.OpID != want.OpID || got.Scope != want.Scope || got.OutputText != want.OutputText || !got.CommittedAt.Equal(want.CommittedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Fatalf("Read = %#v, want %#v", got, want)
		}
		var result, wantResult any
		if json.Unmarshal(got.Result, &result) != nil || json.Unmarshal(want.Result, &wantResult) != nil || !reflect.DeepEqual(result, wantResult) {
			t.Fatalf("result %s, want %s", got.Result, want.Result)
		}
		if _, err := s.Read(ctx, k, (*oprecord.Record)(nil)); err == nil {
			t.Fatal("Read into a nil *oprecord.Record succeeded")
		}
	})
	t.Run("InvalidKey", func(t *testing.T) {
		for _, k := range []idem.Key{{}, {Collection: "Bad", ID: "x"}, {Collection: "notes", ID: "a/b"}} {
			_, err := s.Read(ctx, k, nil)
			if !errors.Is(err, backend.ErrInvalidKey) {
				t.Fatalf("Read(%q) = %v, want ErrInvalidKey", k, err)
			}
			if k.ID != "" && strings.Contains(err.Error(), k.ID) {
				t.Fatalf("error %q echoes the key", err)
			}
		}
	})
	t.Run("CommittedOnly", func(t *testing.T) {
		k := idem.Key{Collection: "notes", ID: "uncommitted"}
		run(t, s, func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, k, note{Text: "pending"}); err != nil {
				return err
			}
			// The Get sends the Put; Read, on another connection, must
			// not see it before the commit.
			if _, err := tx.Get(ctx, k, nil); err != nil {
				return err
			}
			if _, err := s.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Read of an uncommitted write = %v, want ErrNotFound", err)
			}
			return nil
		})
		var n note
		if _, err := s.Read(ctx, k, &n); err != nil || n.Text != "pending" {
			t.Fatalf("Read after the commit = %+v, %v", n, err)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Read(cctx, live, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Read with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

// TestCreateAtCommit: a Create with backend.CreateAtCommit goes out with the
// COMMIT. Over a live document it fails the attempt with ErrConflict, so Run
// calls fn again (whose Create of that key goes out at once and reports
// ErrExists), and nothing of the attempt commits; over an expired one it
// replaces it.
func TestCreateAtCommit(t *testing.T) {
	pool := newPool(t, 2)
	clock := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, pool, &postgres.Options{Now: clock.Now, MaxAttempts: 3})
	ctx := context.Background()
	k := idem.Key{Collection: "ops", ID: "op1"}
	other := idem.Key{Collection: "ops", ID: "side"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, note{Text: "first"})
	})
	_, v1, err := getIn(t, s, k)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("LiveRetried", func(t *testing.T) {
		// The middleware's shape: the first attempt does not read the
		// key; the retry reads it and stops.
		attempts := 0
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			attempts++
			if attempts > 1 {
				_, err := tx.Get(ctx, k, nil)
				return err
			}
			if err := tx.Put(ctx, other, note{Text: "side effect"}); err != nil {
				return err
			}
			if err := tx.Create(ctx, k, note{Text: "second"}, backend.CreateAtCommit()); err != nil {
				t.Errorf("Create with AtCommit over a live document returned %v at the call, want nil (checked at commit)", err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run = %v, want nil (the retry found the document)", err)
		}
		if attempts != 2 {
			t.Fatalf("fn ran %d times, want 2: the live document must fail the first attempt", attempts)
		}
		n, v, err := getIn(t, s, k)
		if err != nil || n.Text != "first" || v != v1 {
			t.Fatalf("document after = %+v version %v (%v); want the first, unchanged at %v", n, v, err, v1)
		}
		if _, _, err := getIn(t, s, other); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("the failed attempt's Put = %v, want ErrNotFound: nothing of it may commit", err)
		}
	})

	t.Run("LiveEveryAttempt", func(t *testing.T) {
		// A fn that does not read the key on its retry is not sent round
		// until it gives up: the retry's Create goes out at once and
		// reports ErrExists.
		attempts := 0
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			attempts++
			return tx.Create(ctx, k, note{Text: "again"}, backend.CreateAtCommit())
		})
		if !errors.Is(err, idem.ErrExists) || errors.Is(err, idem.ErrConflict) || attempts != 2 {
			t.Fatalf("Run = %v after %d attempts; want ErrExists after 2", err, attempts)
		}
		if n, v, err := getIn(t, s, k); err != nil || n.Text != "first" || v != v1 {
			t.Fatalf("document after = %+v version %v (%v); want the first, unchanged", n, v, err)
		}
	})

	t.Run("AbsentCreated", func(t *testing.T) {
		fresh := idem.Key{Collection: "ops", ID: "fresh"}
		run(t, s, func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, fresh, note{Text: "new"}, backend.CreateAtCommit())
		})
		if n, _, err := getIn(t, s, fresh); err != nil || n.Text != "new" {
			t.Fatalf("after Create = %+v, %v", n, err)
		}
	})

	t.Run("ExpiredReplaced", func(t *testing.T) {
		old := idem.Key{Collection: "ops", ID: "old"}
		run(t, s, func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, old, note{Text: "old"}, backend.WithExpiry(clock.Now().Add(time.Second)))
		})
		_, vOld, err := getIn(t, s, old)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		attempts := 0
		err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			attempts++
			return tx.Create(ctx, old, note{Text: "new"}, backend.CreateAtCommit())
		})
		if err != nil || attempts != 1 {
			t.Fatalf("Create over an expired document = %v after %d attempts, want nil after 1", err, attempts)
		}
		n, v, err := getIn(t, s, old)
		if err != nil || n.Text != "new" || v == vOld {
			t.Fatalf("after = %+v version %v (%v); want the new document at a new version", n, v, err)
		}
	})
}

// sqlTracer records the SQL of every query pgx traces.
type sqlTracer struct {
	mu  sync.Mutex
	sql []string
}

func (tr *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	tr.mu.Lock()
	tr.sql = append(tr.sql, data.SQL)
	tr.mu.Unlock()
	return ctx
}

func (tr *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestReadIsTraced: on a pool with a tracer, Read's statement goes through
// pgx, where the tracer sees it, and still reads the document.
func TestReadIsTraced(t *testing.T) {
	tr := &sqlTracer{}
	pool := poolWith(t, 1, pgx.QueryExecModeCacheStatement, nil, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = tr })
	s := newStore(t, pool, nil)
	k := idem.Key{Collection: "notes", ID: "traced"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, note{Text: "seen"}) })
	tr.mu.Lock()
	tr.sql = nil
	tr.mu.Unlock()
	var n note
	if _, err := s.Read(context.Background(), k, &n); err != nil || n.Text != "seen" {
		t.Fatalf("Read = %+v, %v", n, err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.sql) != 1 {
		t.Fatalf("the tracer saw %d queries for one Read, want 1: %q", len(tr.sql), tr.sql)
	}
}
