package merge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/merge/mergetest"
	"github.com/idemkit/sdk/store/memory"
)

// sessionGen draws sessions the stop rule could have produced: a few stops
// under a few op ids, at a few minutes, so that equal end times, equal op
// ids with different stops, and equal summaries are all common.
func sessionGen() *rapid.Generator[Session] {
	stop := rapid.Custom(func(t *rapid.T) Stop {
		return Stop{
			At:      base.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "min")) * time.Minute),
			Outcome: rapid.SampledFrom([]string{"done", "abandoned", "interrupted", "other", ""}).Draw(t, "outcome"),
			Summary: rapid.SampledFrom([]string{"", "wrote", "read", "called"}).Draw(t, "summary"),
			Device:  rapid.SampledFrom([]string{"phone", "laptop"}).Draw(t, "device"),
		}
	})
	return rapid.Custom(func(t *rapid.T) Session {
		return view(Session{
			ID:    rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "id"),
			Start: base.Add(-time.Duration(rapid.IntRange(0, 2).Draw(t, "start")) * time.Hour),
			Stops: rapid.MapOfN(rapid.SampledFrom([]string{"op-a", "op-b", "op-c", "op-d"}), stop, 0, 3).Draw(t, "stops"),
		})
	})
}

func TestStopRulePassesCheck(t *testing.T) {
	mergetest.Check(t, stopRule, sessionGen())
}

var (
	sessionKey = idem.Key{Collection: "sessions", ID: "s1"}
	running    = Session{ID: "s1", Start: base.Add(-30 * time.Minute)}
	at         = func(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }
	phoneStop  = stopRequest(running, "phone-3", Stop{At: at(14, 5), Outcome: "abandoned", Summary: "interrupted by a call", Device: "phone"})
	laptopStop = stopRequest(running, "laptop-7", Stop{At: at(14, 20), Outcome: "done", Summary: "drafted the guide", Device: "laptop"})
	watchStop  = stopRequest(running, "watch-1", Stop{At: at(14, 12), Outcome: "interrupted", Summary: "drafted the guide", Device: "watch"})
)

// deliver creates the running session in a new memory store, applies the
// stops in the given order, each in its own transaction, and returns the
// changes and the stored document.
func deliver(t *testing.T, stops ...Session) ([]merge.Change[Session], json.RawMessage) {
	t.Helper()
	ctx := context.Background()
	s := memory.New(nil)
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, sessionKey, running)
	}); err != nil {
		t.Fatal(err)
	}
	var changes []merge.Change[Session]
	for _, st := range stops {
		var ch merge.Change[Session]
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			var err error
			ch, err = merge.Apply(ctx, tx, sessionKey, st, stopRule, &merge.Options[Session]{Describe: describeStop})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, ch)
	}
	var raw json.RawMessage
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, sessionKey, &raw)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return changes, raw
}

func TestTwoDeviceStopBothOrders(t *testing.T) {
	phoneLast, a := deliver(t, laptopStop, phoneStop)
	laptopLast, b := deliver(t, phoneStop, laptopStop)
	if !bytes.Equal(a, b) {
		t.Fatalf("arrival order changed the stored record:\nlaptop then phone: %s\nphone then laptop: %s", a, b)
	}
	want := "shortened: end moved from 14:20 to 14:05; 1 summary moved to the notes"
	if got := phoneLast[1].Summary; got != want {
		t.Errorf("late phone stop: summary %q, want %q", got, want)
	}
	if !phoneLast[1].Changed || phoneLast[1].Before.End == nil || !phoneLast[1].Before.End.Equal(at(14, 20)) {
		t.Errorf("late phone stop: change %+v", phoneLast[1])
	}
	want = `kept: end stays at 14:05, an earlier stop came first; outcome "abandoned" became "done"; 1 summary moved to the notes`
	if got := laptopLast[1].Summary; got != want {
		t.Errorf("late laptop stop: summary %q, want %q", got, want)
	}

	var s Session
	if err := json.Unmarshal(a, &s); err != nil {
		t.Fatal(err)
	}
	if s.End == nil || !s.End.Equal(at(14, 5)) || s.Outcome != "done" || s.Summary != "interrupted by a call" ||
		len(s.Notes) != 1 || s.Notes[0] != "drafted the guide" || len(s.Stops) != 2 {
		t.Errorf("stored session %s", a)
	}
}

func TestThreeDeviceStopAllOrders(t *testing.T) {
	stops := []Session{phoneStop, laptopStop, watchStop}
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	var first json.RawMessage
	for _, o := range orders {
		_, raw := deliver(t, stops[o[0]], stops[o[1]], stops[o[2]])
		if first == nil {
			first = raw
			continue
		}
		if !bytes.Equal(raw, first) {
			t.Errorf("order %v stored\n%s\nwant\n%s", o, raw, first)
		}
	}
	var s Session
	if err := json.Unmarshal(first, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Stops) != 3 || s.End == nil || !s.End.Equal(at(14, 5)) || s.Outcome != "done" ||
		fmt.Sprint(s.Notes) != "[drafted the guide]" {
		t.Errorf("stored session %s", first)
	}
}

func TestReplayedStopIsUnchanged(t *testing.T) {
	changes, _ := deliver(t, phoneStop, laptopStop, phoneStop, laptopStop)
	for i, ch := range changes[2:] {
		if ch.Changed || ch.Summary != "unchanged" {
			t.Errorf("replay %d: %+v", i, ch)
		}
	}
}
