package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/testenv"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

// serverURL returns the test server's connection string from
// IDEMKIT_POSTGRES_URL (scripts/with-postgres.sh sets it). Without one the
// test is skipped, except in CI, where a missing server fails the run.
func serverURL(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, "IDEMKIT_POSTGRES_URL", "scripts/with-postgres.sh")
}

// newPool connects a small pool to the test server, closed at cleanup.
func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	return newPoolMode(t, maxConns, pgx.QueryExecModeCacheStatement)
}

// newPoolMode is newPool with the connections' default query mode.
func newPoolMode(t testing.TB, maxConns int32, mode pgx.QueryExecMode) *pgxpool.Pool {
	return poolWith(t, maxConns, mode, nil, nil)
}

// poolWith connects a pool to the test server in mode, closed at cleanup;
// wrap (if not nil) wraps each network connection, cfgFn (if not nil)
// adjusts the config.
func poolWith(t testing.TB, maxConns int32, mode pgx.QueryExecMode, wrap func(net.Conn) net.Conn, cfgFn func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	return poolAt(t, serverURL(t), maxConns, mode, wrap, cfgFn)
}

// poolAt is poolWith on the connection string url.
func poolAt(t testing.TB, url string, maxConns int32, mode pgx.QueryExecMode, wrap func(net.Conn) net.Conn, cfgFn func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parsing the connection string: %v", err)
	}
	if maxConns > 0 { // 0: pgxpool's default, max(4, runtime.NumCPU())
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	if wrap != nil {
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}
	}
	if cfgFn != nil {
		cfgFn(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var stores atomic.Int64

// newStore returns a migrated store on its own table, dropped at cleanup.
func newStore(t testing.TB, pool *pgxpool.Pool, opts *postgres.Options) *postgres.Store {
	t.Helper()
	o := postgres.Options{}
	if opts != nil {
		o = *opts
	}
	o.TablePrefix = fmt.Sprintf("t%d_%d_", os.Getpid(), stores.Add(1))
	s, err := postgres.New(pool, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+s.Table()); err != nil {
			t.Errorf("dropping %s: %v", s.Table(), err)
		}
		if _, err := pool.Exec(ctx, "DROP SEQUENCE IF EXISTS "+o.TablePrefix+"idem_docs_version_seq"); err != nil {
			t.Errorf("dropping the sequence: %v", err)
		}
	})
	// Before the table is dropped (cleanups run last first): no sweep
	// round on a dropped table.
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	serverURL(t)
	storetest.Run(t, harness(t, func(t *testing.T) *pgxpool.Pool { return newPool(t, 8) }))
}

// harness is the conformance suite's harness on pools that pool connects.
// Its native writes go to a table of the server's own (idemkit_native),
// through the Querier, and are read back through the pgx.Tx.
func harness(t *testing.T, pool func(t *testing.T) *pgxpool.Pool) storetest.Harness {
	if _, err := pool(t).Exec(t.Context(), `CREATE TABLE IF NOT EXISTS idemkit_native (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			// The suite's sweep cases count what their own Sweep calls
			// delete: no background sweep.
			return newStore(t, pool(t), &postgres.Options{Now: now, MaxDocumentBytes: 64 << 10, NoSweep: true})
		},
		MaxDocumentBytes: 64 << 10,
		Reader:           true,
		ReadOnlyRunner:   true,
		Sweeper:          true,
		As:               []any{new(pgx.Tx), new(postgres.Querier)},
		AsWrite: func(ctx context.Context, tx idem.Tx, id string) error {
			var q postgres.Querier
			if !tx.As(&q) {
				return errors.New("As(*postgres.Querier) = false")
			}
			_, err := q.Exec(ctx, `INSERT INTO idemkit_native (id) VALUES ($1)`, id)
			return err
		},
		AsRead: func(ctx context.Context, tx idem.Tx, id string) (bool, error) {
			var ptx pgx.Tx
			if !tx.As(&ptx) {
				return false, errors.New("As(*pgx.Tx) = false")
			}
			var n int
			err := ptx.QueryRow(ctx, `SELECT count(*) FROM idemkit_native WHERE id = $1`, id).Scan(&n)
			return n == 1, err
		},
	}
}

// TestConformanceSimpleProtocol: a pool that sends no prepared statements
// (as behind a transaction-pooling PgBouncer) gets none from the store
// either, and the store passes the contract and middleware suites on it.
func TestConformanceSimpleProtocol(t *testing.T) {
	needsDirect(t, "reads pg_prepared_statements of the store's session")
	storetest.Run(t, harness(t, func(t *testing.T) *pgxpool.Pool {
		return newPoolMode(t, 8, pgx.QueryExecModeSimpleProtocol)
	}))
	pool := newPoolMode(t, 1, pgx.QueryExecModeSimpleProtocol)
	s := newStore(t, pool, nil)
	k := idem.Key{Collection: "docs", ID: "k"}
	if err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, map[string]int{"n": 1})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(context.Background(), k, nil); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d statements prepared on a simple-protocol connection (%v), want 0", n, err)
	}
}

// TestDeferredCreateFindsLiveDocument: a Create of a key this Tx read as
// absent goes out with the COMMIT. If a live document is there by then (here
// written through the native handle), the transaction must not commit: Run
// retries and, since every attempt does the same, gives up with ErrConflict.
func TestDeferredCreateFindsLiveDocument(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, &postgres.Options{MaxAttempts: 3})
	k := idem.Key{Collection: "docs", ID: "k"}
	attempts := 0
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		attempts++
		if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
			return fmt.Errorf("Get of a new key: %v", err)
		}
		var ptx pgx.Tx
		if !tx.As(&ptx) {
			return errors.New("As(*pgx.Tx) = false")
		}
		if _, err := ptx.Exec(ctx, "INSERT INTO "+s.Table()+" (collection, id, version, doc) VALUES ($1, $2, 1, '{\"by\":\"sql\"}')", k.Collection, k.StoredID()); err != nil {
			return err
		}
		return tx.Create(ctx, k, map[string]string{"by": "create"})
	})
	if !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("Run = %v, want an error wrapping idem.ErrConflict", err)
	}
	if attempts != 3 {
		t.Fatalf("fn ran %d times, want 3 (MaxAttempts)", attempts)
	}
	err = s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	if !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get after the refused commit = %v, want ErrNotFound: nothing may commit", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	pool := newPool(t, 1)
	if _, err := postgres.New(nil, nil); err == nil {
		t.Fatal("New(nil pool) succeeded")
	}
	for _, p := range []string{"Bad", "1abc", "a-b", "a\"b", strings.Repeat("a", 33)} {
		if _, err := postgres.New(pool, &postgres.Options{TablePrefix: p}); err == nil {
			t.Fatalf("New accepted table prefix %q", p)
		} else if strings.Contains(err.Error(), p) {
			t.Fatalf("error %q echoes the prefix", err)
		}
	}
	if _, err := postgres.New(pool, &postgres.Options{MaxAttempts: -1}); err == nil {
		t.Fatal("New accepted MaxAttempts -1")
	}
	s, err := postgres.New(pool, &postgres.Options{TablePrefix: "ok_1", NoSweep: true})
	if err != nil {
		t.Fatalf("New with a good prefix: %v", err)
	}
	if s.Table() != `"ok_1idem_docs"` {
		t.Fatalf("Table() = %s", s.Table())
	}
	if _, err := s.Sweep(context.Background(), 0); err == nil {
		t.Fatal("Sweep(0) succeeded")
	}
}

func TestMigrateIdempotentAndConcurrent(t *testing.T) {
	pool := newPool(t, 4)
	s := newStore(t, pool, nil) // migrated once
	errs := make(chan error, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 4 {
		go func() { errs <- s.Migrate(ctx) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
	}
}

// A lost race fails a batch, after which pgx forgets its cached statements
// for every query in it; the store's own statements are prepared by name,
// so the connection's next transactions prepare nothing again.
func TestLostRaceDoesNotReprepare(t *testing.T) {
	needsDirect(t, "reads pg_prepared_statements of the store's session")
	pool := newPool(t, 1) // one connection: every Run and query below is on it
	s := newStore(t, pool, &postgres.Options{MaxAttempts: 2})
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "taken"}
	create := func(key idem.Key) error {
		return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			if _, err := tx.Get(ctx, idem.Key{Collection: "docs", ID: "other"}, nil); !errors.Is(err, idem.ErrNotFound) {
				return err
			}
			return tx.Create(ctx, key, map[string]int{"n": 1}, backend.CreateAtCommit())
		})
	}
	// prepared lists the session's prepared statements (but the one
	// listing them) with when each was prepared.
	prepared := func() map[string]time.Time {
		rows, err := pool.Query(ctx, "SELECT name, prepare_time FROM pg_prepared_statements WHERE statement NOT LIKE '%pg_prepared_statements%'")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]time.Time{}
		for rows.Next() {
			var name string
			var at time.Time
			if err := rows.Scan(&name, &at); err != nil {
				t.Fatal(err)
			}
			m[name] = at
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, id := range []string{"taken", "warm"} {
		if err := create(idem.Key{Collection: "docs", ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	before := prepared()
	if len(before) == 0 {
		t.Fatal("no prepared statements after two transactions")
	}
	// The first attempt loses the race in its batch; the second sends
	// its Create at once and finds the document.
	if err := create(k); !errors.Is(err, idem.ErrExists) {
		t.Fatalf("create of a live key = %v, want ErrExists", err)
	}
	if err := create(idem.Key{Collection: "docs", ID: "after"}); err != nil {
		t.Fatal(err)
	}
	after := prepared()
	for name, at := range before {
		if got, ok := after[name]; !ok || !got.Equal(at) {
			t.Errorf("statement %s prepared again after the lost race (at %v, then %v, still there: %v)", name, at, got, ok)
		}
	}
}

// A statement prepared by name that the server dropped (DISCARD ALL,
// DEALLOCATE ALL) or can no longer run as prepared (a column's type
// changed) is prepared again: the next Run and Read succeed.
func TestStaleStatementsArePreparedAgain(t *testing.T) {
	needsDirect(t, "drops the prepared statements of the store's session")
	ctx := context.Background()
	for _, change := range []string{"DISCARD ALL", "DEALLOCATE ALL", "ALTER TABLE {t} ALTER COLUMN doc TYPE json"} {
		t.Run(change, func(t *testing.T) {
			pool := newPool(t, 1) // one connection: the change reaches the store's statements
			s := newStore(t, pool, nil)
			k := idem.Key{Collection: "docs", ID: "k"}
			run := func() error {
				return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
					var doc map[string]int
					if _, err := tx.Get(ctx, k, &doc); err != nil && !errors.Is(err, idem.ErrNotFound) {
						return err
					}
					return tx.Put(ctx, k, map[string]int{"n": doc["n"] + 1})
				})
			}
			if err := run(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Read(ctx, k, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, strings.ReplaceAll(change, "{t}", s.Table())); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Read(ctx, k, nil); err != nil {
				t.Errorf("Read after %s: %v", change, err)
			}
			if err := run(); err != nil {
				t.Errorf("Run after %s: %v", change, err)
			}
			var doc map[string]int
			if _, err := s.Read(ctx, k, &doc); err != nil || doc["n"] != 2 {
				t.Errorf("document %v (%v), want n=2: both Runs committed once", doc, err)
			}
		})
	}
}
