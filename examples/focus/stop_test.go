package main

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/merge/mergetest"
)

// sessionGen draws sessions the stop rule could have stored: a few stops
// from few devices, times and summaries, so that ties are likely.
func sessionGen() *rapid.Generator[Session] {
	return rapid.Custom(func(t *rapid.T) Session {
		base := time.Date(2026, 3, 2, 13, 30, 0, 0, time.UTC)
		s := Session{ID: "s1", Device: "phone", Label: "chapter", Start: base,
			Heartbeats: rapid.IntRange(0, 2).Draw(t, "heartbeats"), Deleted: rapid.Bool().Draw(t, "deleted")}
		n := rapid.IntRange(0, 3).Draw(t, "stops")
		for i := range n {
			if s.Stops == nil {
				s.Stops = map[string]Stop{}
			}
			key := rapid.SampledFrom([]string{"op:a", "op:b", "device:phone", "device:laptop"}).Draw(t, fmt.Sprint("key", i))
			s.Stops[key] = Stop{
				At:      base.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, fmt.Sprint("at", i))) * 15 * time.Minute),
				Outcome: rapid.SampledFrom(outcomes).Draw(t, fmt.Sprint("outcome", i)),
				Summary: rapid.SampledFrom([]string{"", "drafted", "a call came in"}).Draw(t, fmt.Sprint("summary", i)),
				Device:  rapid.SampledFrom([]string{"phone", "laptop"}).Draw(t, fmt.Sprint("device", i)),
			}
		}
		return stopView(s)
	})
}

// TestStopRuleLaws: the stop rule is a join, so every arrival order of the
// same stops stores the same session.
func TestStopRuleLaws(t *testing.T) {
	mergetest.Check(t, stopRule, sessionGen())
}
