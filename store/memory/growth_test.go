package memory_test

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/storetest"
)

// heldBytes is the heap in use after a collection: what the store (and
// anything else the test still holds) keeps.
func heldBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rss is the process's resident memory after returning freed memory to the
// system, for the log; 0 where /proc is missing.
func rss() uint64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// TestBackgroundSweepReclaims: op records of calls with unique op ids grow
// the store; once they expire, the background sweep, with nothing calling
// Sweep, brings the memory it holds back near its size before the calls.
func TestBackgroundSweepReclaims(t *testing.T) {
	clock := storetest.NewClock(time.Now())
	s := memory.New(&memory.Options{Now: clock.Now, SweepEvery: 100 * time.Millisecond})
	defer s.Close()

	label := storetest.GrowthLabel(t)
	before, rssBefore := heldBytes(), rss()
	start := time.Now()
	storetest.FillOpRecords(t, s, clock.Now, time.Minute, storetest.GrowthCalls, label)
	filled := time.Since(start)
	grown, rssGrown := heldBytes(), rss()
	growth := int64(grown) - int64(before)
	if growth < int64(storetest.GrowthCalls*label) {
		t.Fatalf("the store grew by %d bytes with %d answers of %d bytes: the op records are not held", growth, storetest.GrowthCalls, label)
	}

	clock.Advance(2 * time.Minute) // every op record has expired
	deadline := time.Now().Add(30 * time.Second)
	after := heldBytes()
	for int64(after)-int64(before) > growth/20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		after = heldBytes()
	}
	swept := time.Since(deadline.Add(-30 * time.Second))
	rssAfter := rss()
	t.Logf("heap in use: %.1f MB before, %.1f MB after %d calls of %d bytes (%v), %.1f MB %v after they expired; RSS %.1f, %.1f, %.1f MB",
		mb(before), mb(grown), storetest.GrowthCalls, label, filled.Round(time.Millisecond), mb(after), swept.Round(time.Millisecond), mb(rssBefore), mb(rssGrown), mb(rssAfter))
	if int64(after)-int64(before) > growth/20 {
		t.Errorf("30 s after the op records expired the store still holds %d of the %d bytes it grew by", int64(after)-int64(before), growth)
	}
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }
