package merge_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/store/memory"
)

// Session is a focus session that a phone and a laptop can both stop.
//
// Stops is the set of attempts: every stop any device sent, keyed by its op
// id, none ever dropped. End, Outcome, Summary and Notes are the view: a
// deterministic function of Stops, filled in by view. So the record is "the
// set of attempts plus a deterministic view of it", and the stop rule is a
// join.
type Session struct {
	ID    string          `json:"id"`
	Start time.Time       `json:"start"`
	Stops map[string]Stop `json:"stops,omitempty"`

	End     *time.Time `json:"end,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	Summary string     `json:"summary,omitempty"`
	Notes   []string   `json:"notes,omitempty"`
}

// Stop is one device's request to stop the session.
type Stop struct {
	At      time.Time `json:"at"` // the event time: when the user pressed stop
	Outcome string    `json:"outcome"`
	Summary string    `json:"summary,omitempty"`
	Device  string    `json:"device,omitempty"`
}

// outcome ranks outcomes: done beats any other.
var outcome = merge.Priority("done", "abandoned", "interrupted")

// stopRule joins two states of a session. Struct starts from the zero
// Session, so the view fields are recomputed by view from the joined stops,
// never carried over from one side.
var stopRule = merge.View(merge.Struct(
	merge.Field(func(s *Session) *string { return &s.ID }, merge.Lowest[string]()),
	merge.Field(func(s *Session) *time.Time { return &s.Start }, merge.Earliest),
	merge.Field(func(s *Session) *map[string]Stop { return &s.Stops }, merge.Union[string](merge.Lowest[Stop]())),
), view)

// view fills in the fields a reader looks at from the stops alone:
//   - the earliest end wins: once anyone stopped the session it was not
//     running (ties go to the smaller op id);
//   - done beats any other outcome;
//   - the summary of the earliest-ending stop is the summary, and every
//     differing summary goes to the notes, in stop order.
func view(s Session) Session {
	s.End, s.Outcome, s.Summary, s.Notes = nil, "", "", nil
	ids := make([]string, 0, len(s.Stops))
	for id := range s.Stops {
		ids = append(ids, id)
	}
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
		s.Outcome = outcome(s.Outcome, st.Outcome)
		if st.Summary != "" && st.Summary != s.Summary && !slices.Contains(s.Notes, st.Summary) {
			s.Notes = append(s.Notes, st.Summary)
		}
	}
	return s
}

// describeStop says in one sentence what a stop changed.
func describeStop(before, after Session) string {
	var parts []string
	switch {
	case after.End == nil:
		parts = append(parts, "running")
	case before.End == nil:
		return fmt.Sprintf("stopped: end set to %s, outcome %s", after.End.Format("15:04"), after.Outcome)
	case after.End.Before(*before.End):
		parts = append(parts, fmt.Sprintf("shortened: end moved from %s to %s",
			before.End.Format("15:04"), after.End.Format("15:04")))
	default:
		parts = append(parts, "kept: end stays at "+after.End.Format("15:04")+", an earlier stop came first")
	}
	if before.Outcome != after.Outcome {
		parts = append(parts, fmt.Sprintf("outcome %q became %q", before.Outcome, after.Outcome))
	}
	if n := len(after.Notes) - len(before.Notes); n > 0 {
		parts = append(parts, fmt.Sprintf("%d summary moved to the notes", n))
	}
	return strings.Join(parts, "; ")
}

// stopRequest is what a device sends: the session it means and one stop,
// under the op id it minted.
func stopRequest(s Session, opID string, st Stop) Session {
	return view(Session{ID: s.ID, Start: s.Start, Stops: map[string]Stop{opID: st}})
}

// The laptop stops the session at 14:20 and its request arrives first; the
// phone stopped it at 14:05 while offline and its request arrives last. The
// session ends at 14:05 with both stops kept, and the laptop's "done" wins
// over the phone's "abandoned". Sending the requests in the other order
// stores the same record, byte for byte.
func Example() {
	ctx := context.Background()
	store := memory.New(nil)
	key := idem.Key{Collection: "sessions", ID: "s1"}
	day := func(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }

	session := Session{ID: "s1", Start: day(13, 30)}
	_ = store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, key, session)
	})

	requests := []Session{
		stopRequest(session, "laptop-7", Stop{At: day(14, 20), Outcome: "done", Summary: "drafted the merge guide", Device: "laptop"}),
		stopRequest(session, "phone-3", Stop{At: day(14, 5), Outcome: "abandoned", Summary: "interrupted by a call", Device: "phone"}),
	}
	for _, req := range requests {
		err := store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			ch, err := merge.Apply(ctx, tx, key, req, stopRule, &merge.Options[Session]{Describe: describeStop})
			if err == nil {
				fmt.Println(ch.Summary)
			}
			return err
		})
		if err != nil {
			fmt.Println("error:", err)
		}
	}

	var stored json.RawMessage
	_ = store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, key, &stored)
		return err
	})
	var s Session
	_ = json.Unmarshal(stored, &s)
	fmt.Println("end:", s.End.Format("15:04"), "outcome:", s.Outcome)
	fmt.Println("summary:", s.Summary)
	fmt.Println("notes:", s.Notes)
	fmt.Println("stops:", len(s.Stops))
	// Output:
	// stopped: end set to 14:20, outcome done
	// shortened: end moved from 14:20 to 14:05; 1 summary moved to the notes
	// end: 14:05 outcome: done
	// summary: interrupted by a call
	// notes: [drafted the merge guide]
	// stops: 2
}
