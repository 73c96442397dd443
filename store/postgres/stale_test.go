package postgres_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/postgres"
)

// A COMMIT whose reply is lost is an unknown outcome in the simple
// protocol and Exec mode too, where pgx's error for it can claim that
// nothing was sent (pgconn.SafeToRetry).
func TestLostCommitReplyIsUnknownInOtherModes(t *testing.T) {
	serverURL(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			pool := poolWith(t, 2, mode, func(c net.Conn) net.Conn { return &cutConn{Conn: c} }, nil)
			s := newStore(t, pool, nil)
			k := idem.Key{Collection: "docs", ID: "lost-reply"}
			err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
				var ptx pgx.Tx
				if !tx.As(&ptx) {
					return errors.New("As(*pgx.Tx) = false")
				}
				armCut(t, ptx)
				return tx.Put(ctx, k, map[string]int{"n": 1})
			})
			_, rerr := s.Read(context.Background(), k, nil)
			if rerr == nil && !errors.Is(err, idem.ErrUnknownOutcome) {
				t.Fatalf("the COMMIT landed (Read finds the document) but Run = %v (SafeToRetry=%v); want idem.ErrUnknownOutcome",
					err, pgconn.SafeToRetry(err))
			}
		})
	}
}

// A statement of fn's own that fails with 0A000 (feature_not_supported)
// or 26000 (an EXECUTE of fn's own missing statement) is fn's error, not a
// stale statement of the store: Run does not call fn again.
func TestOwnErrorsAreNotStaleStatements(t *testing.T) {
	pool := newPool(t, 1)
	s := newStore(t, pool, nil)
	for _, sql := range []string{
		"SELECT count(*) FROM pg_class FOR UPDATE", // 0A000
		"EXECUTE no_such_statement",                // 26000
	} {
		t.Run(sql, func(t *testing.T) {
			calls := 0
			err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
				calls++
				var q postgres.Querier
				tx.As(&q)
				_, err := q.Exec(ctx, sql)
				return err
			})
			if calls != 1 || strings.Contains(err.Error(), "stale") {
				t.Errorf("fn ran %d times; Run = %v", calls, err)
			}
		})
	}
}

// The attempt run again after a stale statement is not one of MaxAttempts:
// with MaxAttempts 1 a Run after DEALLOCATE ALL still succeeds.
func TestStaleStatementWithOneAttempt(t *testing.T) {
	needsDirect(t, "drops the prepared statements of the store's session")
	pool := newPool(t, 1)
	s := newStore(t, pool, &postgres.Options{MaxAttempts: 1})
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "k"}
	put := func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, k, nil); err != nil && !errors.Is(err, idem.ErrNotFound) {
			return err
		}
		return tx.Put(ctx, k, 1)
	}
	if err := s.Run(ctx, put); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx, put); err != nil {
		t.Errorf("Run after DEALLOCATE ALL with MaxAttempts 1 = %v (ErrConflict: %v)", err, errors.Is(err, idem.ErrConflict))
	}
}

// The attempt after a stale statement runs on the connection just
// repaired, not on one from the pool, which may be stale too: after a
// column type change every connection is. An AfterRelease hook (which makes
// pgxpool release asynchronously) stands in for a concurrent request taking
// the repaired connection.
func TestStaleStatementRetriedOnItsConnection(t *testing.T) {
	needsDirect(t, "repairs the prepared statements of one session")
	pool := poolWith(t, 2, pgx.QueryExecModeCacheStatement, nil, func(cfg *pgxpool.Config) {
		cfg.AfterRelease = func(*pgx.Conn) bool { time.Sleep(50 * time.Millisecond); return true }
	})
	s := newStore(t, pool, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "k"}
	get := func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		if errors.Is(err, idem.ErrNotFound) {
			return nil
		}
		return err
	}
	// Warm both connections: two Runs at once, each on its own.
	var wg sync.WaitGroup
	var both sync.WaitGroup
	both.Add(2)
	bothIn := make(chan struct{})
	go func() { both.Wait(); close(bothIn) }()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				err := get(ctx, tx)
				both.Done()
				select {
				case <-bothIn:
				case <-time.After(30 * time.Second):
					return errors.New("the other Run did not reach its transaction within 30 s")
				}
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "both connections idle", func() bool { return pool.Stat().IdleConns() == 2 })
	if _, err := pool.Exec(ctx, "ALTER TABLE "+s.Table()+" ALTER COLUMN doc TYPE json"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both connections idle", func() bool { return pool.Stat().IdleConns() == 2 })
	if err := s.Run(ctx, get); err != nil {
		t.Errorf("Run after the column type change = %v", err)
	}
}

// A handler that begins with As(*pgx.Tx) gets a closed pgx.Tx when the
// pipelined BEGIN fails with 26000, and its statements return
// pgx.ErrTxClosed, no *pgconn.PgError: the store still sees its own
// statement's error and prepares its statements again.
func TestStaleStatementRepairedWhenFnHidesTheError(t *testing.T) {
	needsDirect(t, "drops the prepared statements of the store's session")
	pool := newPool(t, 1)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	native := func(ctx context.Context, tx idem.Tx) error {
		var ptx pgx.Tx
		if !tx.As(&ptx) {
			return errors.New("As = false")
		}
		_, err := ptx.Exec(ctx, "SELECT 1") // no arguments: not prepared, so only the store's statements are stale
		return err
	}
	if err := s.Run(ctx, native); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Run(ctx, native); err != nil {
			t.Errorf("Run %d after DEALLOCATE ALL = %v", i, err)
		}
	}
}

// Versions come from a bigint sequence: a Delete of a version above 2^31
// works (its parameter once took int4 from the literal 0 beside it).
func TestDeleteLargeVersion(t *testing.T) {
	pool := newPool(t, 1)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	seq := strings.TrimSuffix(s.Table(), `"`) + `_version_seq"`
	if _, err := pool.Exec(ctx, "SELECT setval('"+seq+"', 5000000000)"); err != nil {
		t.Fatal(err)
	}
	k := idem.Key{Collection: "docs", ID: "big"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, 1) }); err != nil {
		t.Fatal(err)
	}
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		v, err := tx.Get(ctx, k, nil)
		if err != nil {
			return err
		}
		if v <= 1<<31 {
			return errors.New("version not above 2^31")
		}
		return tx.Delete(ctx, k, v)
	})
	if err != nil {
		t.Fatalf("Delete of version above 2^31: %v", err)
	}
	if _, err := s.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Read after Delete = %v, want ErrNotFound", err)
	}
}

// A connection that died before the COMMIT (a handler that ignored its own
// statement's failure) gets "commit not sent" in every query mode, not an
// unknown outcome: nothing was sent.
func TestClosedBeforeCommitIsNotUnknown(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			pool := poolWith(t, 2, mode, nil, nil)
			s := newStore(t, pool, nil)
			k := idem.Key{Collection: "docs", ID: "closed-before-commit"}
			err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
				var q postgres.Querier
				tx.As(&q)
				rows, _ := q.Query(ctx, "select pg_terminate_backend(pg_backend_pid())")
				for rows.Next() {
				}
				rows.Close() // rows.Err() not checked
				return tx.Put(ctx, k, 1)
			})
			if err == nil || errors.Is(err, idem.ErrUnknownOutcome) {
				t.Errorf("connection closed before the COMMIT batch, Run = %v; want a plain error", err)
			}
		})
	}
}
