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
// do not queue behind batch after batch (docs/sweep.md).
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
