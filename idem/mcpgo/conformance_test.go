package mcpgo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo/mcpgotest"
	"github.com/idemkit/sdk/internal/testenv"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/sqlite"
	"github.com/idemkit/sdk/store/storetest"
)

// The conformance suite's middleware cases through the mcp-go adapter, on
// the stores of the root module; interop/ runs them on DynamoDB and
// Firestore (docs/backend.md, "The conformance suite").

func TestMiddlewareOnMemory(t *testing.T) {
	mcpgotest.RunMiddleware(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			s := memory.New(&memory.Options{Now: now, NoSweep: true})
			t.Cleanup(func() { s.Close() })
			return s
		},
		Reader: true,
	})
}

func TestMiddlewareOnSQLite(t *testing.T) {
	mcpgotest.RunMiddleware(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"), &sqlite.Options{Now: now, NoSweep: true})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Serialized: true,
		Reader:     true,
	})
}

var pgTables atomic.Int64

// TestMiddlewareOnPostgres needs IDEMKIT_POSTGRES_URL (scripts/with-postgres.sh):
// without it the test skips, or fails when CI is set.
func TestMiddlewareOnPostgres(t *testing.T) {
	url := testenv.Service(t, "IDEMKIT_POSTGRES_URL", "scripts/with-postgres.sh")
	mcpgotest.RunMiddleware(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			ctx := context.Background()
			cfg, err := pgxpool.ParseConfig(url)
			if err != nil {
				t.Fatalf("parsing IDEMKIT_POSTGRES_URL: %v", err)
			}
			cfg.MaxConns = 8
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatalf("connecting: %v", err)
			}
			t.Cleanup(pool.Close)
			prefix := fmt.Sprintf("mcpgo%d_%d_", os.Getpid(), pgTables.Add(1))
			s, err := postgres.New(pool, &postgres.Options{Now: now, TablePrefix: prefix, NoSweep: true})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			t.Cleanup(func() {
				for _, drop := range []string{"DROP TABLE IF EXISTS " + s.Table(), "DROP SEQUENCE IF EXISTS " + prefix + "idem_docs_version_seq"} {
					if _, err := pool.Exec(ctx, drop); err != nil {
						t.Errorf("%s: %v", drop, err)
					}
				}
			})
			t.Cleanup(func() { s.Close() }) // before the table is dropped
			return s
		},
		Reader: true,
	})
}
