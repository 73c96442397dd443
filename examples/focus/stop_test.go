package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
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

// TestStopRepeatWithinTheWindow: a stop without a session id from the
// device that ran it, sent again (a client's resend, a model's retry), is
// answered that stop while it is recent, where it was refused
// ambiguous_target ("no running record") against end_focus's promise that
// a retry with the same device is safe; long after, with nothing running,
// it is refused as before.
func TestStopRepeatWithinTheWindow(t *testing.T) {
	var nowNS atomic.Int64
	nowNS.Store(demoNow.UnixNano())
	h := newHarnessAt(t, "memory", func() time.Time { return time.Unix(0, nowNS.Load()).UTC() })
	cs := h.connect()
	h.ok(cs, "start_focus", map[string]any{"device": "phone", "label": "chapter", "session_id": "s-1", "started_at": demoNow.Add(-30 * time.Minute).Format(time.RFC3339)})
	var first, again Ended
	structured(t, h.ok(cs, "end_focus", map[string]any{"device": "phone"}), &first)
	nowNS.Add(int64(2 * time.Minute))
	structured(t, h.ok(h.connect(), "end_focus", map[string]any{"device": "phone"}), &again)
	if again.SessionID != "s-1" || again.Result != first.Result || !again.End.Equal(first.End) {
		t.Fatalf("the repeat 2 minutes later: %+v, want the first stop %+v", again, first)
	}
	nowNS.Add(int64(retryWindow))
	if res := h.call(h.connect(), "end_focus", map[string]any{"device": "phone"}); codeOf(res) != string(target.CodeAmbiguous) {
		t.Fatalf("the repeat past the window: %s, want ambiguous_target", text(res))
	}
}

// TestEventTimesOutOfRangeRefused: an event time far outside any real one
// is refused with invalid_arguments, quoting no value, and writes
// nothing, where 0001-01-01 was stored as now (the zero time read as "not
// sent") and 9999-12-31 clamped to now, silently. The input schema refuses
// a year outside 2000 to 2099 as written; a time written in 2000 with an
// offset that puts it in 1999 passes the schema and is refused by the
// handler.
func TestEventTimesOutOfRangeRefused(t *testing.T) {
	h := newHarness(t, "memory")
	cs := h.connect()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"start_focus", map[string]any{"device": "phone", "label": "chapter", "session_id": "s-old", "started_at": "0001-01-01T00:00:00Z"}},
		{"start_focus", map[string]any{"device": "phone", "label": "chapter", "session_id": "s-far", "started_at": "9999-12-31T00:00:00Z"}},
		{"log_session", map[string]any{"log_id": "l-1", "label": "chapter", "started_at": "1999-12-31T23:59:59Z", "minutes": 5}},
		{"start_focus", map[string]any{"device": "desk", "label": "chapter", "session_id": "s-edge", "started_at": "2000-01-01T00:30:00+01:00"}},
		{"log_session", map[string]any{"log_id": "l-edge", "started_at": "2000-01-01T00:00:00+00:30", "minutes": 5}},
	} {
		res := h.call(cs, c.tool, c.args)
		if codeOf(res) != string(idem.CodeInvalidArguments) || strings.Contains(text(res), "0001") || strings.Contains(text(res), "9999") {
			t.Errorf("%s %v: %q %s, want invalid_arguments quoting nothing", c.tool, c.args, codeOf(res), text(res))
		}
	}
	for _, id := range []string{"s-old", "s-far", "s-edge"} {
		if raw := h.doc(k(colSessions, id)); raw != "" {
			t.Errorf("session %s was stored: %s", id, raw)
		}
	}
	if raw := h.doc(k(colLogs, "l-edge")); raw != "" {
		t.Errorf("log l-edge was stored: %s", raw)
	}
}
