// Package storebench measures stores, apart from the conformance suite
// (store/storetest) that checks them: Benchmark, every store's
// BenchmarkSuite and the source of docs/benchmarks.md, and Scale, the
// on-demand scale benchmark, with the helpers the stores'
// scale tests load their tables with (ScaleRecord, LoadInBatches,
// CheckScaleLoad).
package storebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
//
// Benchmark wraps the handler with idem.Tool, the go-sdk's adapter
// ([GoSDK]); [BenchmarkWith] runs the same benchmark through another
// library's adapter, and [BenchmarkByHand] times in calls, beside the
// middleware's, the protocols a server would otherwise write by hand.
func Benchmark(b *testing.B, newStore func(b *testing.B) idem.Store) {
	BenchmarkWith(b, newStore, GoSDK)
}

// BenchmarkWith is [Benchmark] with the handler wrapped by adapt, so that
// the middleware's cost on one MCP library can be set beside its cost on
// another (idem/mcpgo's benchmark). The bare write is the same on every
// library: a Store.Run, no library's code.
func BenchmarkWith(b *testing.B, newStore func(b *testing.B) idem.Store, adapt Adapter) {
	benchmark(b, func(b *testing.B) (idem.Store, ByHand) { return newStore(b), nil }, adapt)
}

// benchmark runs the sub-benchmarks of [BenchmarkWith], with the protocols
// of the ByHand that newStore returns, if not nil, in calls.
func benchmark(b *testing.B, newStore func(b *testing.B) (idem.Store, ByHand), adapt Adapter) {
	store := func(b *testing.B) idem.Store { s, _ := newStore(b); return s }
	b.Run("calls", func(b *testing.B) { s, h := newStore(b); benchCalls(b, s, adapt, h) })
	b.Run("storm64", func(b *testing.B) { benchStorm(b, store(b), adapt) })
	for _, n := range []int{1, 8, 32} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) { benchClients(b, store(b), adapt, n) })
	}
}

// Note is the benchmark tool's input.
type Note struct {
	Text string `json:"text"`
}

// Added is its output.
type Added struct {
	ID string `json:"id"`
}

// AddNote is the benchmark tool's handler, in no library's types: an
// [Adapter] calls it from the library's typed handler with the call's
// decoded input.
type AddNote func(ctx context.Context, tx idem.Tx, in Note) (Added, error)

// An Adapter registers h as the tool add_note on s through one MCP
// library's idem adapter, with opts, as one process would, and returns a
// [Caller] of the wrapped handler.
type Adapter func(s idem.Store, h AddNote, opts ...idem.Option) Caller

// A Caller sends one tools/call of add_note with args (its JSON arguments)
// to the wrapped handler, built as the library's server hands a decoded
// request to it, and reports whether the answer was a replay. A result
// with IsError set is an error.
type Caller func(ctx context.Context, args json.RawMessage) (replayed bool, err error)

// GoSDK is the [Adapter] of idem.Tool, the go-sdk's.
func GoSDK(s idem.Store, h AddNote, opts ...idem.Option) Caller {
	handle := goSDKHandler(s, h, opts...)
	return func(ctx context.Context, args json.RawMessage) (bool, error) {
		res, err := handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "add_note", Arguments: args}})
		if err != nil {
			return false, err
		}
		if res.IsError {
			return false, fmt.Errorf("tool error: %v", res.Content)
		}
		return res.Meta[idem.MetaReplayed] == true, nil
	}
}

// goSDKHandler is h wrapped by idem.Tool.
func goSDKHandler(s idem.Store, h AddNote, opts ...idem.Option) mcp.ToolHandler {
	_, handle := idem.Tool(&mcp.Tool{Name: "add_note"}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
			out, err := h(ctx, tx, in)
			return nil, out, err
		}, opts...)
	return handle
}

// benchTool is one wrapped handler (one process's) on s.
type benchTool struct {
	call1 Caller
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

// newBenchTool wraps the note-creating handler on s with adapt; made, when
// not nil, collects the ids of the notes it creates by their text.
func newBenchTool(s idem.Store, adapt Adapter, runs *atomic.Int64, made *notesMade) benchTool {
	return benchTool{call1: adapt(s, addNote(runs, made), idem.RequireOpID())}
}

// addNote is the handler that creates a note under a server-made id;
// runs counts its runs, and made, when not nil, collects the ids of the
// notes it creates by their text.
func addNote(runs *atomic.Int64, made *notesMade) AddNote {
	return func(ctx context.Context, tx idem.Tx, in Note) (Added, error) {
		runs.Add(1)
		id := "n" + strconv.FormatInt(benchSeq.Add(1), 10)
		if made != nil {
			made.mu.Lock()
			made.ids[in.Text] = append(made.ids[in.Text], id)
			made.mu.Unlock()
		}
		return Added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
	}
}

// call sends one call with opID (also the note's text) and returns whether
// it was replayed.
func (bt benchTool) call(tb testing.TB, opID string) bool {
	replayed, err := bt.call1(context.Background(), json.RawMessage(`{"text":"`+opID+`","op_id":"`+opID+`"}`))
	if err != nil {
		tb.Fatalf("call %s: %v", opID, err)
	}
	return replayed
}

// benchCalls is the calls sub-benchmark; h, if not nil, adds its
// protocols to each iteration (runByHand).
func benchCalls(b *testing.B, s idem.Store, adapt Adapter, h ByHand) {
	var runs atomic.Int64
	here, elsewhere := newBenchTool(s, adapt, &runs, nil), newBenchTool(s, adapt, &runs, nil)
	var tBare, tFirst, tReplay, tElse time.Duration
	var hand handTimes
	var replays, selects []time.Duration // each round's, for the medians
	round := func() {
		r := timeCalls(b, s, here, elsewhere, &runs)
		tBare, tFirst, tReplay, tElse = tBare+r.bare, tFirst+r.first, tReplay+r.replay, tElse+r.elsewhere
		if h == nil {
			return
		}
		t, err := runByHand(context.Background(), h)
		if err != nil {
			b.Fatal(err)
		}
		hand.optimistic, hand.pipelined, hand.selected = hand.optimistic+t.optimistic, hand.pipelined+t.pipelined, hand.selected+t.selected
		replays, selects = append(replays, r.replay), append(selects, t.selected)
	}
	// Warm the store (connections, statement caches, an emulator's JIT)
	// before anything is timed: with few iterations a cold first one
	// would weigh on whichever variant it falls to.
	for range benchWarmups {
		round()
	}
	tBare, tFirst, tReplay, tElse, hand = 0, 0, 0, 0, handTimes{}
	replays, selects = replays[:0], selects[:0]
	n := 0
	for b.Loop() {
		n++
		round()
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(tBare), "bare-ns")
	b.ReportMetric(per(tFirst), "first-ns")
	b.ReportMetric(per(tReplay), "replay-ns")
	b.ReportMetric(per(tElse), "elsewhere-ns")
	b.ReportMetric(float64(tFirst)/float64(tBare), "first/bare")
	b.ReportMetric(float64(tReplay)/float64(tFirst), "replay/first")
	b.ReportMetric(float64(tElse)/float64(tFirst), "elsewhere/first")
	if h == nil {
		return
	}
	b.ReportMetric(per(hand.optimistic), "optimistic-ns")
	b.ReportMetric(per(hand.pipelined), "pipelined-ns")
	b.ReportMetric(per(hand.selected), "select-ns")
	b.ReportMetric(float64(tFirst)/float64(hand.optimistic), "first/optimistic")
	b.ReportMetric(float64(tFirst)/float64(hand.pipelined), "first/pipelined")
	b.ReportMetric(float64(tReplay)/float64(hand.selected), "replay/select")
	// The same ratio of the rounds' medians, which a stall of a shared
	// machine in a few rounds moves much less.
	b.ReportMetric(float64(pct(replays, 0.5))/float64(pct(selects, 0.5)), "replay/select-p50")
}

// A Library is one MCP library's adapter, by the name its metrics carry,
// for [CompareCalls].
type Library struct {
	Name  string
	Adapt Adapter
}

// CompareCalls measures the calls of [Benchmark] (a bare write, a first
// call, its replay, its repeat elsewhere) through each library's adapter on
// the one store s, every iteration a round through each library in an
// order that turns by one each iteration, so that drift on a shared
// machine hits every library alike. Its figures are medians of the
// iterations, not means, so that a stall of the machine in one library's
// turn does not weigh on that library alone. Metrics, per library:
// NAME-first-ns, and the ratios of medians NAME-first/bare,
// NAME-replay/first, NAME-elsewhere/first; then, for each library after the
// first, each of its ratios against the first library's as NAME-RATIO-vs
// (1.00: the same).
func CompareCalls(b *testing.B, s idem.Store, libs ...Library) {
	runs := make([]atomic.Int64, len(libs))
	here, elsewhere := make([]benchTool, len(libs)), make([]benchTool, len(libs))
	for i, l := range libs {
		here[i], elsewhere[i] = newBenchTool(s, l.Adapt, &runs[i], nil), newBenchTool(s, l.Adapt, &runs[i], nil)
	}
	times := make([][]callTimes, len(libs))
	round := func(it int, timed bool) {
		for j := range libs {
			i := (it + j) % len(libs)
			r := timeCalls(b, s, here[i], elsewhere[i], &runs[i])
			if timed {
				times[i] = append(times[i], r)
			}
		}
	}
	for it := range benchWarmups {
		round(it, false)
	}
	n := 0
	for b.Loop() {
		round(n, true)
		n++
	}
	var first [3]float64
	for i, l := range libs {
		t := medianTimes(times[i])
		r := [3]float64{float64(t.first) / float64(t.bare), float64(t.replay) / float64(t.first), float64(t.elsewhere) / float64(t.first)}
		b.ReportMetric(float64(t.first.Nanoseconds()), l.Name+"-first-ns")
		for k, name := range [3]string{"first/bare", "replay/first", "elsewhere/first"} {
			b.ReportMetric(r[k], l.Name+"-"+name)
			if i > 0 {
				b.ReportMetric(r[k]/first[k], l.Name+"-"+name+"-vs")
			}
		}
		if i == 0 {
			first = r
		}
	}
}

// callTimes is what one round of timeCalls measured.
type callTimes struct{ bare, first, replay, elsewhere time.Duration }

// medianTimes is the median of each of rounds' times.
func medianTimes(rounds []callTimes) callTimes {
	var ds [4][]time.Duration
	for _, r := range rounds {
		ds[0], ds[1], ds[2], ds[3] = append(ds[0], r.bare), append(ds[1], r.first), append(ds[2], r.replay), append(ds[3], r.elsewhere)
	}
	return callTimes{bare: pct(ds[0], 0.5), first: pct(ds[1], 0.5), replay: pct(ds[2], 0.5), elsewhere: pct(ds[3], 0.5)}
}

// timeCalls times, on s, a bare write (a document created in Store.Run),
// a first call through here, its replay through here and its repeat
// through elsewhere; runs counts both tools' handler runs.
func timeCalls(tb testing.TB, s idem.Store, here, elsewhere benchTool, runs *atomic.Int64) callTimes {
	ctx := context.Background()
	id := "op" + strconv.FormatInt(benchSeq.Add(1), 10)
	t0 := time.Now()
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, idem.Key{Collection: "notes", ID: "bare-" + id}, Note{Text: "hello"})
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

func benchStorm(b *testing.B, s idem.Store, adapt Adapter) {
	const calls, processes = 64, 4
	var runs atomic.Int64
	made := &notesMade{ids: map[string][]string{}}
	tools := make([]benchTool, processes)
	for i := range tools {
		tools[i] = newBenchTool(s, adapt, &runs, made)
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
			var got Note
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

func benchClients(b *testing.B, s idem.Store, adapt Adapter, clients int) {
	var runs atomic.Int64
	bt := newBenchTool(s, adapt, &runs, nil)
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

// CallsAlone measures a first call and a replay each alone, for profiles
// (go test -cpuprofile, -memprofile), which cannot tell apart the calls
// that Benchmark's calls interleave. Sub-benchmarks: first, every
// iteration a first call with an op id of its own; replay, every iteration
// a replay by the process that answered it (of 256 op ids answered before
// the loop, in turn). Both report allocations, and cpu-ns/op, the CPU
// time this process (the client) spent a call, which other work on a
// shared machine changes much less than the time a call takes. CallsAlone
// fails if a first call is replayed or a replay is not.
func CallsAlone(b *testing.B, newStore func(b *testing.B) idem.Store) {
	b.Run("first", func(b *testing.B) {
		var runs atomic.Int64
		bt := newBenchTool(newStore(b), GoSDK, &runs, nil)
		for range benchWarmups {
			bt.call(b, "warm"+strconv.FormatInt(benchSeq.Add(1), 10))
		}
		b.ReportAllocs()
		cpu := ProcessCPU()
		for b.Loop() {
			if bt.call(b, "op"+strconv.FormatInt(benchSeq.Add(1), 10)) {
				b.Fatal("a first call was replayed")
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("replay", func(b *testing.B) {
		var runs atomic.Int64
		bt := newBenchTool(newStore(b), GoSDK, &runs, nil)
		ids := make([]string, 256)
		for i := range ids {
			ids[i] = "op" + strconv.FormatInt(benchSeq.Add(1), 10)
			bt.call(b, ids[i])
		}
		b.ReportAllocs()
		cpu := ProcessCPU()
		i := 0
		for b.Loop() {
			if !bt.call(b, ids[i%len(ids)]) {
				b.Fatal("a repeat was not replayed")
			}
			i++
		}
		reportCPU(b, cpu)
	})
}

// reportCPU reports as cpu-ns/op the CPU time the process spent an
// iteration since ProcessCPU returned since.
func reportCPU(b *testing.B, since time.Duration) {
	if now := ProcessCPU(); now > 0 && b.N > 0 {
		b.ReportMetric(float64(now-since)/float64(b.N), "cpu-ns/op")
	}
}
