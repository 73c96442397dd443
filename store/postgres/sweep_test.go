package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

// batchTracer records when each sweep statement began and ended.
type batchTracer struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

type sweepSpan struct{}

func (tr *batchTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, "WITH victims AS") {
		return context.WithValue(ctx, sweepSpan{}, time.Now())
	}
	return ctx
}

func (tr *batchTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if t0, ok := ctx.Value(sweepSpan{}).(time.Time); ok {
		tr.mu.Lock()
		tr.spans = append(tr.spans, [2]time.Time{t0, time.Now()})
		tr.mu.Unlock()
	}
}

// TestSweepRestsWhileCallsRun: while a Run of the store is in progress, a
// sweep waits after each batch for as long as the batch took, so that calls
// do not queue behind batch after batch (docs/stores.md).
func TestSweepRestsWhileCallsRun(t *testing.T) {
	tr := &batchTracer{}
	pool := poolWith(t, 4, pgx.QueryExecModeCacheStatement, nil, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = tr })
	now := time.Now()
	var clock sync.Mutex
	s := newStore(t, pool, &postgres.Options{NoSweep: true, Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
	const docs = 300 // three batches
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		for i := range docs {
			if err := tx.Put(ctx, idem.Key{Collection: "sweep", ID: fmt.Sprint(i)}, note{Text: "x"}, backend.WithExpiry(now.Add(time.Second))); err != nil {
				return err
			}
		}
		return nil
	})
	clock.Lock()
	now = now.Add(time.Hour)
	clock.Unlock()

	// A call in progress for the whole sweep.
	inRun, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			close(inRun)
			<-release
			return nil
		})
	}()
	<-inRun
	n, err := s.Sweep(t.Context(), docs)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil || n != docs {
		t.Fatalf("Sweep = %d, %v; want %d", n, err, docs)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.spans) != docs/100 {
		t.Fatalf("%d sweep statements, want %d", len(tr.spans), docs/100)
	}
	for i := 1; i < len(tr.spans); i++ {
		took, rest := tr.spans[i-1][1].Sub(tr.spans[i-1][0]), tr.spans[i][0].Sub(tr.spans[i-1][1])
		if rest < took {
			t.Errorf("batch %d began %v after batch %d, which took %v: a call was in progress", i+1, rest, i, took)
		}
	}
}

func TestBackgroundSweep(t *testing.T) {
	pool := newPool(t, 4)
	storetest.BackgroundSweep(t, func(t *testing.T, now func() time.Time, o kit.SweepOptions) (idem.Store, func() error) {
		// A table migrated before the store opens: the first round, after
		// the test's short wait, must not come before Migrate.
		table := newStore(t, pool, &postgres.Options{NoSweep: true})
		prefix := strings.TrimSuffix(strings.Trim(table.Table(), `"`), "idem_docs")
		s, err := postgres.New(pool, &postgres.Options{TablePrefix: prefix, Now: now, NoSweep: o.Off, SweepEvery: o.Every, OnSweep: o.Report})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { s.Close() }) // before the table is dropped
		return s, s.Close
	})
}

// TestBackgroundSweepBeforeMigrate: a store opened before its table is made
// (a deployment that migrates in a step of its own) has background rounds
// that find nothing to sweep, not failures; a Sweep called directly still
// reports the missing table, and once Migrate has run the rounds sweep.
func TestBackgroundSweepBeforeMigrate(t *testing.T) {
	pool := newPool(t, 4)
	prefix := fmt.Sprintf("early%d_", time.Now().UnixNano())
	rounds := make(chan kit.SweepRound, 64)
	s, err := postgres.New(pool, &postgres.Options{TablePrefix: prefix, SweepEvery: 20 * time.Millisecond,
		OnSweep: func(r kit.SweepRound) {
			select {
			case rounds <- r:
			default:
			}
		}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		ctx := context.Background()
		pool.Exec(ctx, "DROP TABLE IF EXISTS "+s.Table())
		pool.Exec(ctx, "DROP SEQUENCE IF EXISTS "+prefix+"idem_docs_version_seq")
	})
	next := func() kit.SweepRound {
		t.Helper()
		select {
		case r := <-rounds:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no background sweep round in 10 s")
			return kit.SweepRound{}
		}
	}
	if r := next(); r.Err != nil || r.Deleted != 0 {
		t.Errorf("a round before Migrate: deleted %d, err %v; want 0 and no error", r.Deleted, r.Err)
	}
	if _, err := s.Sweep(context.Background(), 10); err == nil {
		t.Error("Sweep before Migrate: no error for the missing table")
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	k := backend.Key{Collection: "notes", ID: "gone"}
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, map[string]string{"a": "b"}, backend.WithExpiry(time.Now().Add(-time.Hour)))
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := next()
		if r.Err != nil {
			t.Fatalf("a round after Migrate: %v", r.Err)
		}
		if r.Deleted > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired document was not swept in 10 s")
		}
	}
}
