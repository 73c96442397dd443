package storebench

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/memory"
)

// TestScaleRecord: the records a cloud store's Load writes are op records
// the middleware reads as its own: a repeat of the call is answered from
// one without committing the handler's work, the same op id with other arguments is
// key_reused, and once expired the record is not an answer.
func TestScaleRecord(t *testing.T) {
	first := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var now atomic.Pointer[time.Time]
	before := first.Add(-time.Minute)
	now.Store(&before)
	s := memory.New(&memory.Options{Now: func() time.Time { return *now.Load() }})
	ctx := context.Background()
	for i := range 3 {
		k, doc, exp, err := ScaleRecord(i, first)
		if err != nil {
			t.Fatal(err)
		}
		if want := first.Add(time.Duration(i) * time.Microsecond); !exp.Equal(want) {
			t.Fatalf("record %d expires %v, want %v", i, exp, want)
		}
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, k, json.RawMessage(doc), backend.WithExpiry(exp))
		}); err != nil {
			t.Fatal(err)
		}
	}
	var runs atomic.Int64
	made := &notesMade{ids: map[string][]string{}}
	handle := goSDKHandler(s, addNote(&runs, made), idem.RequireOpID())
	// notes returns how many notes with text the handler's runs committed
	// (a call that finds the record at commit may have run it and rolled
	// back).
	notes := func(text string) int {
		n := 0
		for _, id := range made.ids[text] {
			if _, err := s.Read(ctx, idem.Key{Collection: "notes", ID: id}, nil); err == nil {
				n++
			} else if !errors.Is(err, idem.ErrNotFound) {
				t.Fatal(err)
			}
		}
		return n
	}
	call := func(opID, text string) *mcp.CallToolResult {
		res, err := handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
			Name: "add_note", Arguments: json.RawMessage(`{"text":"` + text + `","op_id":"` + opID + `"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	CheckScaleLoad(t, s, 3, first)
	if res := call("scale1", "other"); res.Meta[idem.MetaError] != string(idem.CodeKeyReused) || notes("other") != 0 {
		t.Fatalf("a loaded op id with other arguments: code %q, %d notes committed", res.Meta[idem.MetaError], notes("other"))
	}
	// Record 0 has expired (first), record 2 not yet.
	at := first.Add(time.Microsecond)
	now.Store(&at)
	if res := call("scale0", "scale0"); res.Meta[idem.MetaReplayed] == true || res.IsError || notes("scale0") != 1 {
		t.Fatalf("an expired loaded record: replayed %v, error %v, %d notes committed", res.Meta[idem.MetaReplayed], res.IsError, notes("scale0"))
	}
	if res := call("scale2", "scale2"); res.Meta[idem.MetaReplayed] != true || notes("scale2") != 0 {
		t.Fatalf("a live loaded record after another expired: replayed %v, %d notes committed", res.Meta[idem.MetaReplayed], notes("scale2"))
	}
}

// TestLoadInBatches: the ranges cover 0..n-1 once each, at most batch at a
// time; an error is returned and stops the rest.
func TestLoadInBatches(t *testing.T) {
	for _, n := range []int{0, 1, 24, 25, 26, 1000} {
		var mu sync.Mutex
		seen := make([]int, n)
		err := LoadInBatches(t.Context(), n, 25, 4, func(_ context.Context, from, to int) error {
			if to-from < 1 || to-from > 25 {
				t.Errorf("n=%d: range [%d, %d)", n, from, to)
			}
			mu.Lock()
			defer mu.Unlock()
			for i := from; i < to; i++ {
				seen[i]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: record %d written %d times", n, i, c)
			}
		}
	}
	boom := errors.New("boom")
	var calls atomic.Int64
	err := LoadInBatches(t.Context(), 100_000, 10, 2, func(ctx context.Context, from, to int) error {
		if calls.Add(1) == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() > 10 {
		t.Fatalf("after an error: %v, %d calls", err, calls.Load())
	}
}
