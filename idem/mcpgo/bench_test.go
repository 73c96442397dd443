package mcpgo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/internal/testenv"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/sqlite"
)

// BenchmarkSuite runs the stores' benchmark (storebench.Benchmark) through
// both adapters, the go-sdk's (idem.Tool) and mcp-go's (mcpgo.Tool), one
// after the other on each store, so that their ratios can be set side by
// side (docs/benchmarks.md, "mcp-go"): BenchmarkSuite/STORE/LIBRARY/... .
// Both call the wrapped handler directly, with the request the library's
// server hands a handler after decoding a tools/call, and share the bare
// write (Store.Run): a ratio's difference between the two is the adapter's.
// PostgreSQL needs scripts/with-postgres.sh, as store/postgres's does.
func BenchmarkSuite(b *testing.B) {
	for _, s := range benchStores {
		b.Run(s.name, func(b *testing.B) {
			for _, l := range libraries {
				b.Run(l.Name, func(b *testing.B) { storebench.BenchmarkWith(b, s.open, l.Adapt) })
			}
		})
	}
}

// BenchmarkCompare measures the calls of BenchmarkSuite through both
// adapters on one store, every iteration a round through each in turn
// (storebench.CompareCalls): on a shared machine, whose load moves between
// two runs more than the adapters differ, these are the ratios to compare.
func BenchmarkCompare(b *testing.B) {
	for _, s := range benchStores {
		b.Run(s.name, func(b *testing.B) { storebench.CompareCalls(b, s.open(b), libraries...) })
	}
}

// benchStores are the stores of the benchmarks: memory, where the adapter's
// cost is the largest part of a call, and the two SQL stores.
var benchStores = []struct {
	name string
	open func(b *testing.B) idem.Store
}{
	{"memory", func(*testing.B) idem.Store { return memory.New(nil) }},
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

// libraries are the adapters compared, the go-sdk's first.
var libraries = []storebench.Library{{Name: "gosdk", Adapt: storebench.GoSDK}, {Name: "mcpgo", Adapt: adaptMCPGo}}

// adaptMCPGo is storebench's Adapter for mcp-go: h as an mcpgo.Tool,
// called with a request as mcp-go's server decodes it from the wire (the
// raw arguments kept).
func adaptMCPGo(s idem.Store, h storebench.AddNote, opts ...idem.Option) storebench.Caller {
	st := mcpgo.Tool(mcp.Tool{Name: "add_note"}, s,
		func(ctx context.Context, tx idem.Tx, _ mcp.CallToolRequest, in storebench.Note) (*mcp.CallToolResult, storebench.Added, error) {
			out, err := h(ctx, tx, in)
			return nil, out, err
		}, opts...)
	return func(ctx context.Context, args json.RawMessage) (bool, error) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.RawArguments = "add_note", args
		res, err := st.Handler(ctx, req)
		if err != nil {
			return false, err
		}
		if res.IsError {
			return false, fmt.Errorf("tool error: %v", res.Content)
		}
		return res.Meta != nil && res.Meta.AdditionalFields[idem.MetaReplayed] == true, nil
	}
}

func openSQLite(b *testing.B) idem.Store {
	s, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

var pgStores atomic.Int64

// openPostgres is a store on tables of its own in the test server, on
// pgxpool's default pool, as store/postgres's BenchmarkSuite opens it.
func openPostgres(b *testing.B) idem.Store {
	url := testenv.Service(b, "IDEMKIT_POSTGRES_URL", "scripts/with-postgres.sh")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatalf("connecting: %v", err)
	}
	b.Cleanup(pool.Close)
	prefix := fmt.Sprintf("m%d_%d_", os.Getpid(), pgStores.Add(1))
	s, err := postgres.New(pool, &postgres.Options{TablePrefix: prefix})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatalf("Migrate: %v", err)
	}
	b.Cleanup(func() {
		for _, q := range []string{"DROP TABLE IF EXISTS " + s.Table(), "DROP SEQUENCE IF EXISTS " + prefix + "idem_docs_version_seq"} {
			if _, err := pool.Exec(ctx, q); err != nil {
				b.Errorf("cleaning up: %v", err)
			}
		}
	})
	b.Cleanup(func() { s.Close() })
	return s
}

// TestBenchAdapters checks what BenchmarkSuite's figures rest on, for both
// adapters: a first call runs the handler and is no replay, its repeat is
// a replay that does not run it, and a refusal is an error.
func TestBenchAdapters(t *testing.T) {
	for name, adapt := range map[string]storebench.Adapter{"gosdk": storebench.GoSDK, "mcpgo": adaptMCPGo} {
		t.Run(name, func(t *testing.T) {
			runs := 0
			call := adapt(memory.New(nil), func(ctx context.Context, tx idem.Tx, in storebench.Note) (storebench.Added, error) {
				runs++
				return storebench.Added{ID: in.Text}, tx.Create(ctx, idem.Key{Collection: "notes", ID: in.Text}, in)
			}, idem.RequireOpID())
			args := json.RawMessage(`{"text":"a","op_id":"op-1"}`)
			for i, want := range []bool{false, true} {
				replayed, err := call(t.Context(), args)
				if err != nil || replayed != want || runs != 1 {
					t.Fatalf("call %d: replayed %v, error %v, %d runs; want replayed %v, 1 run", i, replayed, err, runs, want)
				}
			}
			if _, err := call(t.Context(), json.RawMessage(`{"text":"a"}`)); err == nil || runs != 1 {
				t.Fatalf("a call without its op id: error %v, %d runs", err, runs)
			}
		})
	}
}
