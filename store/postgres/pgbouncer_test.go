package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/internal/testenv"
	"github.com/idemkit/sdk/store/storetest"
)

// pooledURL returns the connection string of the test database through a
// PgBouncer in transaction pooling, from IDEMKIT_PGBOUNCER_URL
// (scripts/with-pgbouncer.sh sets it). Without one the test is skipped,
// except in CI, where a missing PgBouncer fails the run.
func pooledURL(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, "IDEMKIT_PGBOUNCER_URL", "scripts/with-postgres.sh scripts/with-pgbouncer.sh")
}

// pooledPool connects a pool through PgBouncer in mode, closed at cleanup.
func pooledPool(t testing.TB, maxConns int32, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	return poolAt(t, pooledURL(t), maxConns, mode, nil, nil)
}

// pooledModes are the query modes the store supports behind a
// transaction-pooling PgBouncer: none of them keeps a prepared statement
// from one transaction to the next.
var pooledModes = []pgx.QueryExecMode{
	pgx.QueryExecModeSimpleProtocol,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeCacheDescribe,
}

var direct struct {
	once sync.Once
	err  error // why IDEMKIT_POSTGRES_URL is not a direct connection; nil if it is
}

// needsDirect skips a test that needs its session to be one PostgreSQL
// backend (why says what for: a backend's pid, session state, a session
// advisory lock) unless IDEMKIT_POSTGRES_URL reaches PostgreSQL directly.
// Behind a pooler the pid a connection is told is not its backend's, and
// consecutive transactions of one connection may run on different backends.
func needsDirect(t testing.TB, why string) {
	t.Helper()
	url := serverURL(t)
	direct.once.Do(func() { direct.err = checkDirect(url) })
	if direct.err != nil {
		t.Skipf("needs a direct connection to PostgreSQL (%s), which IDEMKIT_POSTGRES_URL is not: %v", why, direct.err)
	}
}

// checkDirect reports why url does not reach one PostgreSQL backend per
// connection: the backend pid PostgreSQL reports at connection is the one
// pg_backend_pid() returns; PgBouncer reports one of its own.
func checkDirect(url string) error {
	if pooled := os.Getenv("IDEMKIT_PGBOUNCER_URL"); pooled != "" && pooled == url {
		return fmt.Errorf("it is IDEMKIT_PGBOUNCER_URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return err
	}
	if pid != conn.PgConn().PID() {
		return fmt.Errorf("the connection was told backend pid %d, but its backend is %d: a pooler is in between", conn.PgConn().PID(), pid)
	}
	return nil
}

// TestConformanceBehindPgBouncer: the whole conformance suite through a
// PgBouncer in transaction pooling (4 server connections), in each query
// mode that sends no named prepared statement.
func TestConformanceBehindPgBouncer(t *testing.T) {
	pooledURL(t)
	for _, mode := range pooledModes {
		t.Run(mode.String(), func(t *testing.T) {
			storetest.Run(t, harness(t, func(t *testing.T) *pgxpool.Pool { return pooledPool(t, 8, mode) }))
		})
	}
}
