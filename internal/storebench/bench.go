// Package storebench measures stores, apart from the conformance suite
// (store/storetest) that checks them: Benchmark, every store's
// BenchmarkSuite and the source of docs/benchmarks.md, and Scale, the
// on-demand scale benchmark of docs/sweep.md, with the helpers the stores'
// scale tests load their tables with (ScaleRecord, LoadInBatches,
// CheckScaleLoad).
package storebench

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// Benchmark measures, on the stores newStore returns, what a tool call
// costs with and without the middleware, with the same names and metrics on
// every store, so that docs/benchmarks.md can set the stores side by side.
// A store's benchmark file calls it:
//
//	func BenchmarkSuite(b *testing.B) { storebench.Benchmark(b, newBenchStore) }
//
// The handler creates one small document under a server-made id (unsafe to
// repeat without its op id) and is called directly, without an MCP
// transport, so the figures are the middleware's and the store's own cost.
// Its sub-benchmarks:
//
//   - calls: per iteration, interleaved so that drift hits them alike, a
//     bare write (the same document created in Store.Run), a first call
//     through the middleware, a replay of it (the process that answered it
//     lately: one read on stores that can read outside a transaction), and
//     a repeat reaching another process (another wrapped handler on the same
//     store, which has not answered it). Metrics: each one's ns and the
//     ratios first/bare, replay/first, elsewhere/first.
//   - storm64: per iteration, 64 identical calls at once, spread over four
//     wrapped handlers (four processes). Metrics: executions/op (the
//     handler's runs that committed, which must be 1), and the p50 and p99
//     latency of the 64 calls.
//   - clients=N (1, 8, 32): distinct ops sent by N goroutines at once,
//     after N goroutines have warmed the store up at once. Metric: ops/s.
//
// Benchmark fails if a replay runs the handler or a storm commits more
// than once: a figure of a broken run is not a figure.
func Benchmark(b *testing.B, newStore func(b *testing.B) idem.Store) {
	b.Run("calls", func(b *testing.B) { benchCalls(b, newStore(b)) })
	b.Run("storm64", func(b *testing.B) { benchStorm(b, newStore(b)) })
	for _, n := range []int{1, 8, 32} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) { benchClients(b, newStore(b), n) })
	}
}

// benchNote is the benchmark tool's input.
type benchNote struct {
	Text string `json:"text"`
}

// benchAdded is its output.
type benchAdded struct {
	ID string `json:"id"`
}

// benchTool is one wrapped handler (one process's) on s; its runs count the
// handler's executions, committed or not, and made holds the ids of the
// notes each text's runs created.
type benchTool struct {
	handle mcp.ToolHandler
	runs   *atomic.Int64
	made   *notesMade // nil, or where the runs' note ids are kept
}

// notesMade holds the ids of the notes the handler's runs created, by
// their text.
type notesMade struct {
	mu  sync.Mutex
	ids map[string][]string
}

var benchSeq atomic.Int64

// benchWarmups is how many untimed rounds run before a measurement.
const benchWarmups = 10

// newBenchTool wraps the note-creating handler on s; made, when not nil,
// collects the ids of the notes it creates by their text.
func newBenchTool(s idem.Store, runs *atomic.Int64, made *notesMade) benchTool {
	_, h := idem.Tool(&mcp.Tool{Name: "add_note"}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in benchNote) (*mcp.CallToolResult, benchAdded, error) {
			runs.Add(1)
			id := "n" + strconv.FormatInt(benchSeq.Add(1), 10)
			if made != nil {
				made.mu.Lock()
				made.ids[in.Text] = append(made.ids[in.Text], id)
				made.mu.Unlock()
			}
			return nil, benchAdded{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.RequireOpID())
	return benchTool{handle: h, runs: runs, made: made}
}

// call sends one call with opID (also the note's text) and returns whether
// it was replayed.
func (bt benchTool) call(tb testing.TB, opID string) bool {
	res, err := bt.handle(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
		Name: "add_note", Arguments: json.RawMessage(`{"text":"` + opID + `","op_id":"` + opID + `"}`)}})
	if err != nil || res.IsError {
		tb.Fatalf("call %s: %v %v", opID, err, res)
	}
	return res.Meta[idem.MetaReplayed] == true
}

func benchCalls(b *testing.B, s idem.Store) {
	var runs atomic.Int64
	here, elsewhere := newBenchTool(s, &runs, nil), newBenchTool(s, &runs, nil)
	var tBare, tFirst, tReplay, tElse time.Duration
	n := 0
	// Warm the store (connections, statement caches, an emulator's JIT)
	// before anything is timed: with few iterations a cold first one
	// would weigh on whichever variant it falls to.
	for range benchWarmups {
		timeCalls(b, s, here, elsewhere, &runs)
	}
	for b.Loop() {
		n++
		r := timeCalls(b, s, here, elsewhere, &runs)
		tBare, tFirst, tReplay, tElse = tBare+r.bare, tFirst+r.first, tReplay+r.replay, tElse+r.elsewhere
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(tBare), "bare-ns")
	b.ReportMetric(per(tFirst), "first-ns")
	b.ReportMetric(per(tReplay), "replay-ns")
	b.ReportMetric(per(tElse), "elsewhere-ns")
	b.ReportMetric(float64(tFirst)/float64(tBare), "first/bare")
	b.ReportMetric(float64(tReplay)/float64(tFirst), "replay/first")
	b.ReportMetric(float64(tElse)/float64(tFirst), "elsewhere/first")
}

// callTimes is what one round of timeCalls measured.
type callTimes struct{ bare, first, replay, elsewhere time.Duration }

// timeCalls times, on s, a bare write (a document created in Store.Run),
// a first call through here, its replay through here and its repeat
// through elsewhere; runs counts both tools' handler runs.
func timeCalls(tb testing.TB, s idem.Store, here, elsewhere benchTool, runs *atomic.Int64) callTimes {
	ctx := context.Background()
	id := "op" + strconv.FormatInt(benchSeq.Add(1), 10)
	t0 := time.Now()
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, idem.Key{Collection: "notes", ID: "bare-" + id}, benchNote{Text: "hello"})
	}); err != nil {
		tb.Fatal(err)
	}
	t1 := time.Now()
	if here.call(tb, id) {
		tb.Fatal("a first call was replayed")
	}
	t2 := time.Now()
	before := runs.Load()
	if !here.call(tb, id) {
		tb.Fatal("a repeat was not replayed")
	}
	t3 := time.Now()
	if !elsewhere.call(tb, id) {
		tb.Fatal("a repeat elsewhere was not replayed")
	}
	t4 := time.Now()
	if runs.Load() > before+1 {
		// The repeat elsewhere may run the handler in a transaction
		// that rolls back; the replay here must not run it at all.
		tb.Fatalf("repeats ran the handler %d times", runs.Load()-before)
	}
	return callTimes{bare: t1.Sub(t0), first: t2.Sub(t1), replay: t3.Sub(t2), elsewhere: t4.Sub(t3)}
}

func benchStorm(b *testing.B, s idem.Store) {
	const calls, processes = 64, 4
	var runs atomic.Int64
	made := &notesMade{ids: map[string][]string{}}
	tools := make([]benchTool, processes)
	for i := range tools {
		tools[i] = newBenchTool(s, &runs, made)
	}
	for range benchWarmups {
		tools[0].call(b, "warm"+strconv.FormatInt(benchSeq.Add(1), 10))
	}
	var lat []time.Duration
	var mu sync.Mutex
	executions := int64(0)
	n := 0
	for b.Loop() {
		n++
		id := "storm" + strconv.FormatInt(benchSeq.Add(1), 10)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				tools[i%processes].call(b, id)
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		executions += committedNotes(b, s, made, id)
	}
	if executions != int64(n) {
		b.Fatalf("%d storms committed %d times", n, executions)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e6 }
	b.ReportMetric(float64(executions)/float64(n), "executions/op")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// committedNotes counts the notes of text that the store holds: a run
// whose transaction rolled back (a duplicate that found the op record) left
// none.
func committedNotes(b *testing.B, s idem.Store, made *notesMade, text string) int64 {
	b.Helper()
	made.mu.Lock()
	ids := made.ids[text]
	delete(made.ids, text)
	made.mu.Unlock()
	var n int64
	for _, id := range ids {
		err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			var got benchNote
			_, err := tx.Get(ctx, idem.Key{Collection: "notes", ID: id}, &got)
			return err
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, idem.ErrNotFound):
			b.Fatal(err)
		}
	}
	return n
}

func benchClients(b *testing.B, s idem.Store, clients int) {
	var runs atomic.Int64
	bt := newBenchTool(s, &runs, nil)
	// Warm up with as many clients at once as are measured, so that a
	// pool opens the connections they use (on PostgreSQL a connection
	// costs its backend's start and the store's statements' prepares)
	// before the timer starts, not in it.
	var warm sync.WaitGroup
	for range clients {
		warm.Go(func() {
			for range benchWarmups {
				bt.call(b, "warm"+strconv.FormatInt(benchSeq.Add(1), 10))
			}
		})
	}
	warm.Wait()
	var next atomic.Int64
	total := int64(b.N)
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= total {
				if bt.call(b, "tp"+strconv.FormatInt(benchSeq.Add(1), 10)) {
					b.Error("a distinct op was replayed")
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(total)/time.Since(t0).Seconds(), "ops/s")
}
