package storetest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// ScaleStore is a store for Scale, with a way to fill its table fast.
type ScaleStore struct {
	idem.Store
	// Load adds n op records to the store's table in bulk (COPY, one
	// INSERT ... SELECT), expiring one microsecond apart from first on.
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
	// holds the writer).
	Batch int
}

// Scale measures a store with its op-record table at each of h.Sizes
// records, on demand: it runs only with IDEMKIT_SCALE=1 (it loads millions
// of rows). At each size it
//
//   - times, interleaved on an empty store and on the loaded one, a bare
//     write, a first call and its replay (timeCalls), and reports first/bare
//     and replay/first at the size over the same on the empty store
//     (medians; must be within 10%);
//   - lets the loaded records expire and sweeps them in ten slices, each
//     with Sweep calls of h.Batch, and reports each slice's rate (the last
//     must be at least 80% of the first), the slowest batch and the final
//     call that finds nothing left;
//   - during the fifth slice sends first calls from two clients, and
//     compares their p99 with the same clients' without a sweep, just
//     before it (must be at most 2x).
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
	t0 := time.Now()
	if err := full.Load(ctx, n, first); err != nil {
		t.Fatalf("loading %d records: %v", n, err)
	}
	t.Logf("loaded %d records in %v", n, time.Since(t0).Round(time.Millisecond))

	// Calls: the empty and the loaded store, round by round.
	var runsE, runsF atomic.Int64
	te := [2]benchTool{newBenchTool(empty, &runsE, nil), newBenchTool(empty, &runsE, nil)}
	tf := [2]benchTool{newBenchTool(full, &runsF, nil), newBenchTool(full, &runsF, nil)}
	rounds := envInt(t, "IDEMKIT_SCALE_ROUNDS", 400)
	var onEmpty, onFull []callTimes
	for range rounds {
		onEmpty = append(onEmpty, timeCalls(t, empty, te[0], te[1], &runsE))
		onFull = append(onFull, timeCalls(t, full, tf[0], tf[1], &runsF))
	}
	fbE, rfE := callRatios(onEmpty)
	fbF, rfF := callRatios(onFull)
	t.Logf("empty: first/bare %.2f, replay/first %.2f; %d records: first/bare %.2f (%.2fx empty), replay/first %.2f (%.2fx empty)",
		fbE, rfE, n, fbF, fbF/fbE, rfF, rfF/rfE)
	if fbF/fbE > 1.1 || rfF/rfE > 1.1 {
		t.Errorf("at %d records the calls cost more than 10%% over the empty table", n)
	}

	// Sweep: every loaded record has expired; the calls' op records have not.
	expired.Store(true)
	sw := full.Store.(backend.Sweeper)
	quiet := firstCallLatencies(t, full.Store, 5*time.Second, nil)
	slice := n / 10
	var rates [10]float64
	var during []time.Duration
	var slowest [2]time.Duration // alone, during the calls
	for i := range rates {
		want := slice
		if i == len(rates)-1 {
			want = n - 9*slice
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if i == 4 {
			wg.Go(func() { during = firstCallLatencies(t, full.Store, 0, stop) })
		}
		k := 0
		if i == 4 {
			k = 1
		}
		start := time.Now()
		for done := 0; done < want; {
			b0 := time.Now()
			got, err := sw.Sweep(ctx, min(h.Batch, want-done))
			slowest[k] = max(slowest[k], time.Since(b0))
			if err != nil || got == 0 {
				t.Fatalf("Sweep after %d of slice %d: %d, %v", done, i, got, err)
			}
			done += got
		}
		rates[i] = float64(want) / time.Since(start).Seconds()
		close(stop)
		wg.Wait()
	}
	t0 = time.Now()
	left, err := sw.Sweep(ctx, h.Batch)
	if err != nil || left != 0 {
		t.Fatalf("Sweep after the backlog = %d, %v; want 0", left, err)
	}
	final := time.Since(t0)
	var rs []string
	for _, r := range rates {
		rs = append(rs, fmt.Sprintf("%.0f", r))
	}
	t.Logf("sweep of %d: records/s by tenth [%s]; last/first %.2f; slowest batch of %d %v alone, %v during calls; final empty call %v",
		n, strings.Join(rs, " "), rates[9]/rates[0], h.Batch, slowest[0].Round(time.Microsecond), slowest[1].Round(time.Microsecond), final.Round(time.Microsecond))
	if rates[9] < 0.8*rates[0] {
		t.Errorf("the sweep's last tenth ran at %.2f of its first", rates[9]/rates[0])
	}
	q50, q99 := pct(quiet, 0.5), pct(quiet, 0.99)
	d50, d99 := pct(during, 0.5), pct(during, 0.99)
	t.Logf("first calls (2 clients) without a sweep: p50 %v p99 %v (%d); during it: p50 %v p99 %v max %v (%d); p99 during/without %.2f",
		q50, q99, len(quiet), d50, d99, during[len(during)-1], len(during), float64(d99)/float64(q99))
	if d99 > 2*q99 {
		t.Errorf("first calls during a sweep: p99 %.2fx without one", float64(d99)/float64(q99))
	}
}

// callRatios returns the median first/bare and replay/first of rounds.
func callRatios(rounds []callTimes) (firstBare, replayFirst float64) {
	med := func(f func(callTimes) time.Duration) float64 {
		var ds []time.Duration
		for _, r := range rounds {
			ds = append(ds, f(r))
		}
		return float64(pct(ds, 0.5))
	}
	bare := med(func(r callTimes) time.Duration { return r.bare })
	first := med(func(r callTimes) time.Duration { return r.first })
	replay := med(func(r callTimes) time.Duration { return r.replay })
	return first / bare, replay / first
}

// firstCallLatencies sends distinct first calls to s from two clients for
// d, or until stop is closed, and returns their latencies, sorted.
func firstCallLatencies(t *testing.T, s idem.Store, d time.Duration, stop chan struct{}) []time.Duration {
	var runs atomic.Int64
	bt := newBenchTool(s, &runs, nil)
	end := time.Now().Add(d)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				if stop == nil && time.Now().After(end) {
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if bt.call(t, "sc"+strconv.FormatInt(benchSeq.Add(1), 10)) {
					t.Error("a first call was replayed")
					return
				}
				dt := time.Since(t0)
				mu.Lock()
				lat = append(lat, dt)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		t.Fatal("no call finished")
	}
	slices.Sort(lat)
	return lat
}

// pct returns the p-quantile of ds (sorting a copy).
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))].Round(time.Microsecond)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s: not a positive number", name)
	}
	return n
}
