package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

// serverURL returns the test server's connection string from
// IDEMKIT_POSTGRES_URL (scripts/with-postgres.sh sets it). Without one the
// test is skipped, except in CI, where a missing server fails the run.
func serverURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("IDEMKIT_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("IDEMKIT_POSTGRES_URL is not set: run the tests under scripts/with-postgres.sh")
		}
		t.Skip("IDEMKIT_POSTGRES_URL is not set; run scripts/with-postgres.sh go test ./store/postgres/")
	}
	return url
}

// newPool connects a small pool to the test server, closed at cleanup.
func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(serverURL(t))
	if err != nil {
		t.Fatalf("parsing IDEMKIT_POSTGRES_URL: %v", err)
	}
	cfg.MaxConns = maxConns
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
	return s
}

func TestConformance(t *testing.T) {
	serverURL(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			return newStore(t, newPool(t, 8), &postgres.Options{Now: now, MaxDocumentBytes: 64 << 10})
		},
		MaxDocumentBytes: 64 << 10,
	})
}
