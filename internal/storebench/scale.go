package storebench

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/internal/testenv"
)

// ScaleStore is a store for Scale, with a way to fill its table fast.
type ScaleStore struct {
	idem.Store
	// Load adds n op records to the store's table in bulk (one
	// INSERT ... SELECT; on DynamoDB and Firestore, batches of ScaleRecord
	// from concurrent workers), expiring one microsecond apart from first on.
	// Scale calls it with n 0 on the empty store.
	Load func(ctx context.Context, n int, first time.Time) error
}

// ScaleHarness tells Scale how to make stores of one backend.
type ScaleHarness struct {
	// New returns a new, empty store whose clock (for expiry) is now; the
	// harness cleans up (drops the table) with t.Cleanup.
	New func(t *testing.T, now func() time.Time) ScaleStore
	// Sizes are the numbers of op records to measure at, unless
	// IDEMKIT_SCALE_SIZES (comma-separated) says otherwise.
	Sizes []int
	// Batch is the store's sweep batch: Scale sweeps with this limit per
	// call, so each call's time is one batch's (on SQLite, how long it
	// holds the writer). Unused for a store without Sweep.
	Batch int
	// Rounds is how many rounds of calls are timed on each store, unless
	// IDEMKIT_SCALE_ROUNDS says otherwise; 0 means 400. A store whose calls
	// take microseconds needs more for steady medians.
	Rounds int
}

// Scale measures a store with its op-record table at each of h.Sizes
// records, on demand: it runs only with IDEMKIT_SCALE=1 (it loads millions
// of rows). At each size it
//
//   - times, interleaved on an empty store and on the loaded one, a bare
//     write, a first call and its replay (timeCalls), and reports first/bare
//     and replay/first at the size over the same on the empty store
//     (medians; must be within 10%);
//   - on a store with Sweep (a backend.Sweeper; DynamoDB and Firestore have
//     none, their TTL deletes expired items), in the subtest "sweep":
//     lets the loaded records expire and sweeps them in ten slices, each
//     with Sweep calls of h.Batch, and reports each slice's rate (the last
//     must be at least 80% of the first), the slowest batch and the final
//     call that finds nothing left;
//   - during the fifth slice, which sweeps for 100 ms and rests for 100 ms
//     in turn, sends first calls from two clients, and compares the p99 of
//     the calls made while it swept (or across a switch) with that of the
//     calls made while it rested (must be at most 2x).
//
// Scale fails when a goal is missed; its log holds the figures.
func Scale(t *testing.T, h ScaleHarness) {
	if os.Getenv("IDEMKIT_SCALE") != "1" {
		t.Skip("the scale benchmark runs with IDEMKIT_SCALE=1")
	}
	sizes := h.Sizes
	if env := os.Getenv("IDEMKIT_SCALE_SIZES"); env != "" {
		sizes = nil
		for f := range strings.SplitSeq(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 10 {
				t.Fatalf("IDEMKIT_SCALE_SIZES: %q is not a size", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		t.Run("records="+strconv.Itoa(n), func(t *testing.T) { scaleAt(t, h, n) })
	}
}

func scaleAt(t *testing.T, h ScaleHarness, n int) {
	ctx := t.Context()
	// The loaded records expire an hour ago by the wall clock; until the
	// sweep the stores' clock stands before them.
	first := time.Now().Add(-time.Hour)
	var expired atomic.Bool
	now := func() time.Time {
		if expired.Load() {
			return time.Now()
		}
		return first.Add(-time.Minute)
	}
	empty, full := h.New(t, now), h.New(t, now)
	// The empty store is loaded with nothing, so that what a Load does
	// besides adding records (PostgreSQL's VACUUM ANALYZE) is done to both.
	if err := empty.Load(ctx, 0, first); err != nil {
		t.Fatalf("loading no records: %v", err)
	}
	t0 := time.Now()
	if err := full.Load(ctx, n, first); err != nil {
		t.Fatalf("loading %d records: %v", n, err)
	}
	load := time.Since(t0)
	t.Logf("loaded %d records in %v (%.0f records/s)", n, load.Round(time.Millisecond), float64(n)/load.Seconds())

	// Calls: the empty and the loaded store, round by round.
	var runsE, runsF atomic.Int64
	te := [2]benchTool{newBenchTool(empty, GoSDK, &runsE, nil), newBenchTool(empty, GoSDK, &runsE, nil)}
	tf := [2]benchTool{newBenchTool(full, GoSDK, &runsF, nil), newBenchTool(full, GoSDK, &runsF, nil)}
	rounds := testenv.Count(t, "IDEMKIT_SCALE_ROUNDS", cmp.Or(h.Rounds, 400))
	var onEmpty, onFull []callTimes
	for r := range rounds {
		// Each store goes first in every other round, so that neither
		// gains from coming second (connections, caches just warmed).
		if r%2 == 0 {
			onEmpty = append(onEmpty, timeCalls(t, empty, te[0], te[1], &runsE))
		}
		onFull = append(onFull, timeCalls(t, full, tf[0], tf[1], &runsF))
		if r%2 == 1 {
			onEmpty = append(onEmpty, timeCalls(t, empty, te[0], te[1], &runsE))
		}
	}
	fbE, rfE := callRatios(onEmpty)
	fbF, rfF := callRatios(onFull)
	t.Logf("empty: first/bare %.2f, replay/first %.2f; %d records: first/bare %.2f (%.2fx empty), replay/first %.2f (%.2fx empty)",
		fbE, rfE, n, fbF, fbF/fbE, rfF, rfF/rfE)
	e, f := medianTimes(onEmpty), medianTimes(onFull)
	t.Logf("medians, empty: bare %v, first %v, replay %v; %d records: bare %v, first %v, replay %v",
		e.bare, e.first, e.replay, n, f.bare, f.first, f.replay)
	if fbF/fbE > 1.1 || rfF/rfE > 1.1 {
		t.Errorf("at %d records the calls cost more than 10%% over the empty table", n)
	}

	t.Run("sweep", func(t *testing.T) {
		sw, ok := full.Store.(backend.Sweeper)
		if !ok {
			t.Skipf("%T has no Sweep (backend.Sweeper): expired items are deleted by the database's TTL, not by the store", full.Store)
		}
		// Every loaded record has expired; the calls' op records have not.
		expired.Store(true)
		scaleSweep(t, h, full.Store, sw, n)
	})
}

// scaleSweep sweeps the n expired records of s (sw) in ten slices, with
// first calls during the fifth.
func scaleSweep(t *testing.T, h ScaleHarness, s idem.Store, sw backend.Sweeper, n int) {
	ctx := t.Context()
	slice := n / 10
	var rates [10]float64
	var slowest [2]time.Duration // alone, during the calls
	var phase atomic.Int64       // even: sweeping; odd: resting
	var quiet, during []time.Duration
	var sweeping time.Duration // of the fifth tenth, without its rests
	for i := range rates {
		want := slice
		if i == len(rates)-1 {
			want = n - 9*slice
		}
		k := 0
		var stop chan struct{}
		var wg sync.WaitGroup
		if i == 4 {
			k, stop = 1, make(chan struct{})
			wg.Go(func() { quiet, during = callThroughPhases(t, s, &phase, stop) })
		}
		start := time.Now()
		phaseStart := start
		for done := 0; done < want; {
			if i == 4 && time.Since(phaseStart) > sweepPhase {
				// The fifth tenth sweeps and rests in turn, so that the
				// calls' latencies with and without a sweep come from
				// the same seconds of a machine shared with other work.
				sweeping += time.Since(phaseStart)
				phase.Add(1)
				time.Sleep(sweepPhase)
				phase.Add(1)
				phaseStart = time.Now()
			}
			b0 := time.Now()
			got, err := sw.Sweep(ctx, min(h.Batch, want-done))
			slowest[k] = max(slowest[k], time.Since(b0))
			if err != nil || got == 0 {
				t.Fatalf("Sweep after %d of slice %d: %d, %v", done, i, got, err)
			}
			done += got
		}
		rates[i] = float64(want) / time.Since(start).Seconds()
		if i == 4 {
			sweeping += time.Since(phaseStart)
			phase.Add(1)
			time.Sleep(sweepPhase) // a last rest, as long as the others
			close(stop)
			wg.Wait()
		}
	}
	t0 := time.Now()
	left, err := sw.Sweep(ctx, h.Batch)
	if err != nil || left != 0 {
		t.Fatalf("Sweep after the backlog = %d, %v; want 0", left, err)
	}
	final := time.Since(t0)
	var rs []string
	for _, r := range rates {
		rs = append(rs, fmt.Sprintf("%.0f", r))
	}
	t.Logf("sweep of %d: records/s by tenth [%s] (the fifth %.0f while sweeping); last/first %.2f; slowest batch of %d %v alone, %v during calls; final empty call %v",
		n, strings.Join(rs, " "), float64(slice)/sweeping.Seconds(), rates[9]/rates[0], h.Batch, slowest[0].Round(time.Microsecond), slowest[1].Round(time.Microsecond), final.Round(time.Microsecond))
	if rates[9] < 0.8*rates[0] {
		t.Errorf("the sweep's last tenth ran at %.2f of its first", rates[9]/rates[0])
	}
	if len(quiet) < 100 || len(during) < 100 {
		t.Fatalf("too few first calls to compare: %d without a sweep, %d during one", len(quiet), len(during))
	}
	q50, q99 := pct(quiet, 0.5), pct(quiet, 0.99)
	d50, d99 := pct(during, 0.5), pct(during, 0.99)
	t.Logf("first calls (2 clients), %v phases: resting: p50 %v p99 %v (%d); sweeping or across a switch: p50 %v p99 %v max %v (%d); p50 during/without %.2f, p99 %.2f",
		sweepPhase, q50, q99, len(quiet), d50, d99, during[len(during)-1], len(during), float64(d50)/float64(q50), float64(d99)/float64(q99))
	if d99 > 2*q99 {
		t.Errorf("first calls during a sweep: p99 %.2fx without one", float64(d99)/float64(q99))
	}
}

// sweepPhase is how long the fifth tenth of a sweep sweeps, and then rests,
// in turn.
const sweepPhase = 100 * time.Millisecond

// callThroughPhases sends distinct first calls to s from two clients until
// stop is closed and returns their latencies, sorted, by what the sweep was
// doing (phase: even while it sweeps, odd while it rests): a call begun and
// ended in one rest is without a sweep; any other is during one (a call
// across a switch is counted against the sweep).
func callThroughPhases(t *testing.T, s idem.Store, phase *atomic.Int64, stop chan struct{}) (without, during []time.Duration) {
	var runs atomic.Int64
	bt := newBenchTool(s, GoSDK, &runs, nil)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p0, t0 := phase.Load(), time.Now()
				if bt.call(t, "sc"+strconv.FormatInt(benchSeq.Add(1), 10)) {
					t.Error("a first call was replayed")
					return
				}
				dt, p1 := time.Since(t0), phase.Load()
				mu.Lock()
				if p0 == p1 && p0%2 == 1 {
					without = append(without, dt)
				} else {
					during = append(during, dt)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(without)
	slices.Sort(during)
	return without, during
}

// callRatios returns the median first/bare and replay/first of rounds.
func callRatios(rounds []callTimes) (firstBare, replayFirst float64) {
	m := medianTimes(rounds)
	return float64(m.first) / float64(m.bare), float64(m.replay) / float64(m.first)
}

// pct returns the p-quantile of ds (sorting a copy).
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// ScaleRecord returns the i-th op record of a Load from first on, as the
// middleware stores a first call's: its key (a call to add_note without a
// scope, with op id and text "scale" and i), its JSON document (about 520
// bytes; a repeat of that call is answered from it) and its
// expiry, first plus i microseconds. Loads that write items one by one
// (DynamoDB, Firestore) write these.
func ScaleRecord(i int, first time.Time) (k idem.Key, doc []byte, expires time.Time, err error) {
	opID := "scale" + strconv.Itoa(i)
	expires = first.Add(time.Duration(i) * time.Microsecond).UTC()
	out := `{"id":"n` + strconv.Itoa(i) + `"}`
	// The arguments without the op id, as encoding/json writes them, are
	// also their canonical form: their hash is the fingerprint too.
	args := oprecord.Hex(sha256.Sum256([]byte(`{"text":"` + opID + `"}`)))
	rec := oprecord.Record{
		Tool:        "add_note",
		OpID:        opID,
		Fingerprint: args,
		ArgsHash:    args,
		Result:      json.RawMessage(`{"content":[{"type":"text","text":` + strconv.Quote(out) + `}],"structuredContent":` + out + `}`),
		OutputText:  out,
		CommittedAt: expires.Add(-24 * time.Hour),
		ExpiresAt:   expires,
		Attempt:     "scale." + strconv.FormatInt(int64(i), 36),
	}
	doc, err = json.Marshal(rec)
	return oprecord.Key("", rec.Tool, opID), doc, expires, err
}

// CheckScaleLoad checks that a Load of n records from first on (first in
// the future of s's clock) left ScaleRecord 0..n-1 in s as op records the
// middleware answers from: a repeat of each one's call is replayed, with
// the record's output, and commits nothing.
func CheckScaleLoad(t *testing.T, s idem.Store, n int, first time.Time) {
	t.Helper()
	r, ok := s.(backend.Reader)
	if !ok {
		t.Fatalf("%T is not a backend.Reader", s)
	}
	var runs atomic.Int64
	made := &notesMade{ids: map[string][]string{}}
	handle := goSDKHandler(s, addNote(&runs, made), idem.RequireOpID())
	for i := range n {
		opID := "scale" + strconv.Itoa(i)
		res, err := handle(t.Context(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
			Name: "add_note", Arguments: json.RawMessage(`{"text":"` + opID + `","op_id":"` + opID + `"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(res.StructuredContent)
		if res.Meta[idem.MetaReplayed] != true || res.IsError || string(out) != `{"id":"n`+strconv.Itoa(i)+`"}` {
			t.Fatalf("loaded record %d: replayed %v, error %v, output %s", i, res.Meta[idem.MetaReplayed], res.IsError, out)
		}
		for _, id := range made.ids[opID] {
			if _, err := r.Read(t.Context(), idem.Key{Collection: "notes", ID: id}, nil); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("a repeat of loaded record %d committed its note: %v", i, err)
			}
		}
	}
}

// LoadInBatches calls write for the ranges [from, to) that cover 0..n-1,
// batch records each, from workers goroutines, and returns the first error
// (after which it starts no more).
func LoadInBatches(ctx context.Context, n, batch, workers int, write func(ctx context.Context, from, to int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	starts := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for from := range starts {
				if err := write(ctx, from, min(from+batch, n)); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
feed:
	for from := 0; from < n; from += batch {
		select {
		case starts <- from:
		case <-ctx.Done():
			break feed
		}
	}
	close(starts)
	wg.Wait()
	return context.Cause(ctx)
}
