package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/sqlite"
)

// benchSeq makes op ids and document ids unique across every run of a
// benchmark function, so a "first call" is never a replay.
var benchSeq atomic.Int64

// cpuMeter reports, as cpu-ns/op, the CPU time the process spent per
// iteration (its garbage collector's included): on a machine shared with
// other work, wall time per op grows with the load; CPU time much less.
type cpuMeter time.Duration

func startCPU() cpuMeter { return cpuMeter(storebench.ProcessCPU()) }

func (m cpuMeter) report(b *testing.B) {
	if now := storebench.ProcessCPU(); now > 0 && b.N > 0 {
		b.ReportMetric(float64(now-time.Duration(m))/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkMiddleware compares, on each embedded store, a handler's write in
// a bare transaction with the same write wrapped by the middleware: a first
// call (op record read and created in the same transaction) and a replay
// (answered from the op record). The handler is called directly, without a
// transport, so the figures are the middleware's own cost. Report ratios of
// one run, not absolute times.
func BenchmarkMiddleware(b *testing.B) {
	stores := map[string]func(b *testing.B) idem.Store{
		"memory": func(b *testing.B) idem.Store { return memory.New(nil) },
		"sqlite": func(b *testing.B) idem.Store {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, name := range []string{"memory", "sqlite"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s := stores[name](b)
			write := func(ctx context.Context, tx idem.Tx, in Note) error {
				return tx.Create(ctx, idem.Key{Collection: "notes", ID: fmt.Sprintf("%s-%d", name, benchSeq.Add(1))}, in)
			}
			h := idem.DirectTool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
				return nil, Added{ID: "x"}, write(ctx, tx, in)
			}, idem.OpID())
			in := Note{Text: "hello"}
			req := func(opID string) *mcp.CallToolRequest {
				return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
					Name: "add_note", Arguments: json.RawMessage(`{"text":"hello","op_id":"` + opID + `"}`)}}
			}
			b.Run("bare", func(b *testing.B) {
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return write(ctx, tx, in) }); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
			// bare+record: the bare write and, in the same Run, a document
			// of the size and shape of the op record a first call stores: what
			// the store itself charges for keeping the record.
			b.Run("bare+record", func(b *testing.B) {
				now := time.Now()
				rec := oprecord.Record{
					Tool: "add_note", OpID: "first-1", Fingerprint: strings.Repeat("f", 64), ArgsHash: strings.Repeat("a", 64),
					Result: json.RawMessage("null"), OutputText: `{"id":"x"}`, CommittedAt: now, ExpiresAt: now.Add(24 * time.Hour),
					Attempt: "1x2y3z4a5b6c.1",
				}
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					k := idem.Key{Collection: oprecord.Collection, ID: fmt.Sprintf("first-%d", benchSeq.Add(1))}
					err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
						if err := write(ctx, tx, in); err != nil {
							return err
						}
						return tx.Create(ctx, k, &rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
			b.Run("wrapped-first", func(b *testing.B) {
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					res, _, err := h(ctx, req(fmt.Sprintf("first-%d", benchSeq.Add(1))), in)
					if err != nil || (res != nil && res.IsError) {
						b.Fatal(err, res)
					}
				}
				cpu.report(b)
			})
			// wrapped-first-bounded: a first call on a Guard with
			// MaxStoredBytes, which reads and writes the scope's usage
			// document in the same transaction.
			b.Run("wrapped-first-bounded", func(b *testing.B) {
				hb := idem.DirectTool(idem.New(s, &idem.Options{MaxStoredBytes: 1 << 40}), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
					return nil, Added{ID: "x"}, write(ctx, tx, in)
				}, idem.OpID())
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					res, _, err := hb(ctx, req(fmt.Sprintf("bounded-%d", benchSeq.Add(1))), in)
					if err != nil || (res != nil && res.IsError) {
						b.Fatal(err, res)
					}
				}
				cpu.report(b)
			})
			b.Run("wrapped-replay", func(b *testing.B) {
				r := req("replayed-op")
				if _, _, err := h(ctx, r, in); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					res, _, err := h(ctx, r, in)
					if err != nil || res.Meta[idem.MetaReplayed] != true {
						b.Fatal(err, res)
					}
				}
				cpu.report(b)
			})
		})
	}
}

// BenchmarkMiddlewareSteady is BenchmarkMiddleware's bare write and first
// call on a memory store of steady size: every document written expires
// within an hour of the store's clock, which moves on two hours after every
// 1,024 calls, when a Sweep deletes what expired. BenchmarkMiddleware's store
// grows by two documents a call for as long as it runs, and its map's
// growth and the garbage collector's marking of it are a large part of what
// it measures; a server's store of op records is swept and does not grow.
// The sweeps' time is in the figures.
func BenchmarkMiddlewareSteady(b *testing.B) {
	ctx := context.Background()
	var offset atomic.Int64
	s := memory.New(&memory.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	write := func(ctx context.Context, tx idem.Tx, in Note) error {
		return tx.Create(ctx, idem.Key{Collection: "notes", ID: "steady-" + strconv.FormatInt(benchSeq.Add(1), 10)}, in,
			backend.WithExpiry(time.Now().Add(time.Duration(offset.Load())+time.Hour)))
	}
	h := idem.DirectTool(idem.New(s, &idem.Options{TTL: time.Hour}), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
		return nil, Added{ID: "x"}, write(ctx, tx, in)
	}, idem.OpID())
	in := Note{Text: "hello"}
	every := func(b *testing.B, i int) {
		if i%1024 == 1023 {
			offset.Add(int64(2 * time.Hour))
			if _, err := s.Sweep(ctx, 1<<30); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for i := 0; b.Loop(); i++ {
			if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return write(ctx, tx, in) }); err != nil {
				b.Fatal(err)
			}
			every(b, i)
		}
		cpu.report(b)
	})
	b.Run("wrapped-first", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for i := 0; b.Loop(); i++ {
			opID := "steady-" + strconv.FormatInt(benchSeq.Add(1), 10)
			res, _, err := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
				Name: "add_note", Arguments: json.RawMessage(`{"text":"hello","op_id":"` + opID + `"}`)}}, in)
			if err != nil || (res != nil && res.IsError) {
				b.Fatal(err, res)
			}
			every(b, i)
		}
		cpu.report(b)
	})
}

// BenchmarkOverSession compares, through an in-memory MCP session, a tool
// written with the go-sdk alone (mcp.AddTool: the SDK decodes and validates
// the arguments, the handler writes in a bare Store.Run, the SDK encodes the
// output) with the same tool wrapped by AddTool: a first call and a replay.
// The difference between sdk and wrapped-first is what the middleware adds
// to a tool a server author would otherwise write; both pay the session,
// the schema validation and the JSON. Report the difference and the ratio
// of one run.
func BenchmarkOverSession(b *testing.B) {
	ctx := context.Background()
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
	write := func(ctx context.Context, tx idem.Tx, in Note) error {
		return tx.Create(ctx, idem.Key{Collection: "notes", ID: fmt.Sprintf("s-%d", benchSeq.Add(1))}, in)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sdk_note"}, func(ctx context.Context, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
		return nil, Added{ID: "x"}, s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return write(ctx, tx, in) })
	})
	idem.AddTool(srv, &mcp.Tool{Name: "idem_note"}, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
		return nil, Added{ID: "x"}, write(ctx, tx, in)
	}, idem.OpID())
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	call := func(b *testing.B, name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		return res
	}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			call(b, "sdk_note", map[string]any{"text": "hello"})
		}
		cpu.report(b)
	})
	b.Run("wrapped-first", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			call(b, "idem_note", map[string]any{"text": "hello", "op_id": "x" + strconv.FormatInt(benchSeq.Add(1), 10)})
		}
		cpu.report(b)
	})
	b.Run("wrapped-replay", func(b *testing.B) {
		args := map[string]any{"text": "hello", "op_id": "replayed-op"}
		call(b, "idem_note", args)
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if res := call(b, "idem_note", args); res.Meta[idem.MetaReplayed] != true {
				b.Fatal("not replayed")
			}
		}
		cpu.report(b)
	})
}
