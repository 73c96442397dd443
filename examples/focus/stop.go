package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/sdk/merge"
)

// Session is a focus session: what start_focus wrote, every device's stop
// (keyed by the device: a device's repeat is its same stop), and
// the view a reader looks at (End, Outcome, Summary, Notes), computed from
// the stops alone. So two devices that stop it in either order store the
// same record (see stopRule).
type Session struct {
	ID         string          `json:"id"`
	Device     string          `json:"device"`
	Label      string          `json:"label,omitempty"`
	Start      time.Time       `json:"start"`
	Stops      map[string]Stop `json:"stops,omitempty"`
	Heartbeats int             `json:"heartbeats,omitempty"`
	Deleted    bool            `json:"deleted,omitempty"`

	End     *time.Time `json:"end,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	Summary string     `json:"summary,omitempty"`
	Notes   []string   `json:"notes,omitempty"`
}

// Running reports whether the session has no stop and is not deleted.
func (s Session) Running() bool { return s.End == nil && !s.Deleted }

// Stop is one device's request to stop a session.
type Stop struct {
	At      time.Time `json:"at"` // the event time: when the user pressed stop
	Outcome string    `json:"outcome"`
	Summary string    `json:"summary,omitempty"`
	Device  string    `json:"device,omitempty"`
}

// outcomes ranks the outcomes of a stop: done beats any other.
var outcomes = []string{"done", "abandoned", "interrupted"}

var outcomeRule = merge.Priority(outcomes...)

// stopRule joins two states of a session: the earliest end wins (once
// anyone stopped the session it was not running), every stop is kept, done
// beats any other outcome, and a differing later summary goes to the notes.
// Struct starts from the zero Session, so the view is recomputed from the
// joined stops, never carried over from one side.
var stopRule = merge.View(merge.Struct(
	merge.Field(func(s *Session) *string { return &s.ID }, merge.Lowest[string]()),
	merge.Field(func(s *Session) *string { return &s.Device }, merge.Lowest[string]()),
	merge.Field(func(s *Session) *string { return &s.Label }, merge.Lowest[string]()),
	merge.Field(func(s *Session) *time.Time { return &s.Start }, merge.Earliest),
	merge.Field(func(s *Session) *map[string]Stop { return &s.Stops }, merge.Union[string](earliestStop)),
	merge.Field(func(s *Session) *int { return &s.Heartbeats }, merge.Max[int]),
	merge.Field(func(s *Session) *bool { return &s.Deleted }, merge.Priority(true, false)),
), stopView)

// earliestStop keeps a device's earlier stop of two (ties broken by
// merge.Lowest), so a device's retry with a later time or other words
// changes nothing.
func earliestStop(a, b Stop) Stop {
	switch a.At.Compare(b.At) {
	case -1:
		return a
	case 1:
		return b
	}
	return merge.Lowest[Stop]()(a, b)
}

// stopView fills in End, Outcome, Summary and Notes from the stops alone,
// in the order of their times (then keys).
func stopView(s Session) Session {
	s.End, s.Outcome, s.Summary, s.Notes = nil, "", "", nil
	ids := slices.Collect(maps.Keys(s.Stops))
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(s.Stops[a].At.Compare(s.Stops[b].At), cmp.Compare(a, b))
	})
	for i, id := range ids {
		st := s.Stops[id]
		if i == 0 {
			end := st.At
			s.End, s.Outcome, s.Summary = &end, st.Outcome, st.Summary
			continue
		}
		s.Outcome = outcomeRule(s.Outcome, st.Outcome)
		if st.Summary != "" && st.Summary != s.Summary && !slices.Contains(s.Notes, st.Summary) {
			s.Notes = append(s.Notes, st.Summary)
		}
	}
	return s
}

// stopRequest is the session as one stop request sees it: what it knows of
// the session plus its own stop, under key.
func stopRequest(s Session, key string, st Stop) Session {
	in := s
	in.Stops = map[string]Stop{key: st}
	in.End, in.Outcome, in.Summary, in.Notes = nil, "", "", nil
	return stopView(in)
}

// stopEffect says what the stop under key did to the session s that holds
// it: s without that stop, compared with s. It depends on the stored
// session only, so a repeat of a stop answers as the first did, and the
// stop that arrives late but ended first is told it shortened the session.
func stopEffect(s Session, key string) (result, sentence string) {
	without := s
	without.Stops = maps.Clone(s.Stops)
	delete(without.Stops, key)
	without = stopView(without)
	return describeStop(without, s)
}

// describeStop says in a word and one sentence what moved from before to
// after. It is also the Describe of merge.Apply.
func describeStop(before, after Session) (result, sentence string) {
	hm := func(t *time.Time) string { return t.UTC().Format("15:04") }
	var parts []string
	switch {
	case after.End == nil:
		return "running", "the session is still running"
	case before.End == nil:
		result = "stopped"
		parts = append(parts, fmt.Sprintf("stopped: end set to %s, outcome %s", hm(after.End), after.Outcome))
	case after.End.Before(*before.End):
		result = "shortened"
		parts = append(parts, fmt.Sprintf("shortened: end moved from %s to %s, since this stop came first", hm(before.End), hm(after.End)))
	default:
		result = "kept"
		parts = append(parts, fmt.Sprintf("kept: end stays at %s, an earlier stop came first", hm(after.End)))
	}
	if before.End != nil && before.Outcome != after.Outcome {
		parts = append(parts, fmt.Sprintf("outcome %s became %s", before.Outcome, after.Outcome))
	}
	if n := len(after.Notes) - len(before.Notes); n > 0 {
		parts = append(parts, fmt.Sprintf("%d summary moved to the notes", n))
	}
	return result, strings.Join(parts, "; ")
}
