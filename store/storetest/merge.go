package storetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/merge"
)

// The merge subtests store a focus session that several devices stop: the
// set of stops keyed by op id plus a view of it (the earliest end wins, done
// beats any other outcome, the earliest stop's summary is the summary and the
// others go to the notes). It is the stop rule of package merge's example.

type mergeSession struct {
	ID    string               `json:"id"`
	Start time.Time            `json:"start"`
	Stops map[string]mergeStop `json:"stops,omitempty"`

	End     *time.Time `json:"end,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	Summary string     `json:"summary,omitempty"`
	Notes   []string   `json:"notes,omitempty"`
}

type mergeStop struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Summary string    `json:"summary,omitempty"`
}

var mergeOutcome = merge.Priority("done", "abandoned", "interrupted")

var mergeStopRule = merge.View(merge.Struct(
	merge.Field(func(s *mergeSession) *string { return &s.ID }, merge.Lowest[string]()),
	merge.Field(func(s *mergeSession) *time.Time { return &s.Start }, merge.Earliest),
	merge.Field(func(s *mergeSession) *map[string]mergeStop { return &s.Stops }, merge.Union[string](merge.Lowest[mergeStop]())),
), mergeView)

func mergeView(s mergeSession) mergeSession {
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
		s.Outcome = mergeOutcome(s.Outcome, st.Outcome)
		if st.Summary != "" && st.Summary != s.Summary && !slices.Contains(s.Notes, st.Summary) {
			s.Notes = append(s.Notes, st.Summary)
		}
	}
	return s
}

func mergeDescribe(before, after mergeSession) string {
	switch {
	case after.End == nil:
		return "running"
	case before.End == nil:
		return "stopped: end set to " + after.End.Format("15:04")
	case after.End.Before(*before.End):
		return fmt.Sprintf("shortened: end moved from %s to %s", before.End.Format("15:04"), after.End.Format("15:04"))
	}
	return "kept: end stays at " + after.End.Format("15:04")
}

var (
	mergeKey     = idem.Key{Collection: "sessions", ID: "s1"}
	mergeStart   = time.Date(2030, 1, 2, 13, 30, 0, 0, time.UTC)
	mergeRunning = mergeSession{ID: "s1", Start: mergeStart}
)

func mergeAt(h, m int) time.Time { return time.Date(2030, 1, 2, h, m, 0, 0, time.UTC) }

func mergeRequest(opID string, st mergeStop) mergeSession {
	return mergeView(mergeSession{ID: "s1", Start: mergeStart, Stops: map[string]mergeStop{opID: st}})
}

var (
	mergePhone  = mergeRequest("phone-3", mergeStop{At: mergeAt(14, 5), Outcome: "abandoned", Summary: "interrupted by a call"})
	mergeLaptop = mergeRequest("laptop-7", mergeStop{At: mergeAt(14, 20), Outcome: "done", Summary: "drafted the guide"})
	mergeWatch  = mergeRequest("watch-1", mergeStop{At: mergeAt(14, 12), Outcome: "interrupted", Summary: "drafted the guide"})
)

func runMerge(t *testing.T, h Harness) {
	t.Run("TwoDeviceStopBothOrders", func(t *testing.T) { testMergeBothOrders(t, h) })
	t.Run("ThreeDeviceStopAllOrders", func(t *testing.T) { testMergeAllOrders(t, h) })
	t.Run("StartsDifferBothOrders", func(t *testing.T) { testMergeStartsDiffer(t, h) })
	t.Run("ReplayDoesNotWrite", func(t *testing.T) { testMergeReplay(t, h) })
	t.Run("CreatesAbsentRecord", func(t *testing.T) { testMergeCreate(t, h) })
	t.Run("ConcurrentApplyLosesNothing", func(t *testing.T) { testMergeConcurrent(t, h, false) })
	t.Run("ConcurrentApplyWritesConditionally", func(t *testing.T) { testMergeConcurrent(t, h, true) })
}

// mergeStore is one merge subtest's store.
type mergeStore struct {
	t *testing.T
	s idem.Store
}

func newMergeStore(t *testing.T, h Harness, withSession bool) *mergeStore {
	t.Helper()
	s := h.New(t, NewClock(mergeStart).Now)
	if s == nil {
		t.Fatal("storetest: Harness.New returned nil")
	}
	m := &mergeStore{t: t, s: s}
	if withSession {
		if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, mergeKey, mergeRunning)
		}); err != nil {
			t.Fatalf("creating the session: %v", err)
		}
	}
	return m
}

func (m *mergeStore) apply(in mergeSession) (merge.Change[mergeSession], error) {
	var ch merge.Change[mergeSession]
	err := m.s.Run(m.t.Context(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		ch, err = merge.Apply(ctx, tx, mergeKey, in, mergeStopRule, &merge.Options[mergeSession]{Describe: mergeDescribe})
		return err
	})
	return ch, err
}

// raw returns the stored session as the store holds it, and its version.
func (m *mergeStore) raw() (json.RawMessage, idem.Version) {
	m.t.Helper()
	var raw json.RawMessage
	var v idem.Version
	if err := m.s.Run(m.t.Context(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		v, err = tx.Get(ctx, mergeKey, &raw)
		return err
	}); err != nil {
		m.t.Fatalf("reading the session: %v", err)
	}
	return raw, v
}

// deliver applies the requests in order to a new store holding the running
// session and returns the changes and the stored document.
func deliverMerge(t *testing.T, h Harness, reqs ...mergeSession) ([]merge.Change[mergeSession], json.RawMessage) {
	t.Helper()
	m := newMergeStore(t, h, true)
	var changes []merge.Change[mergeSession]
	for i, r := range reqs {
		ch, err := m.apply(r)
		if err != nil {
			t.Fatalf("request %d: Apply: %v", i, err)
		}
		changes = append(changes, ch)
	}
	raw, _ := m.raw()
	return changes, raw
}

func testMergeBothOrders(t *testing.T, h Harness) {
	phoneLast, a := deliverMerge(t, h, mergeLaptop, mergePhone)
	laptopLast, b := deliverMerge(t, h, mergePhone, mergeLaptop)
	if !bytes.Equal(a, b) {
		t.Fatalf("arrival order changed the stored record:\nlaptop then phone: %s\nphone then laptop: %s", a, b)
	}
	late := phoneLast[1]
	if want := "shortened: end moved from 14:20 to 14:05"; late.Summary != want || !late.Changed {
		t.Errorf("late phone stop: changed=%v summary %q, want %q", late.Changed, late.Summary, want)
	}
	if late.Before.End == nil || !late.Before.End.Equal(mergeAt(14, 20)) || late.After.End == nil || !late.After.End.Equal(mergeAt(14, 5)) {
		t.Errorf("late phone stop: before %v, after %v", late.Before.End, late.After.End)
	}
	if want := "kept: end stays at 14:05"; laptopLast[1].Summary != want || !laptopLast[1].Changed {
		t.Errorf("late laptop stop: changed=%v summary %q, want %q", laptopLast[1].Changed, laptopLast[1].Summary, want)
	}
	var s mergeSession
	if err := json.Unmarshal(a, &s); err != nil {
		t.Fatalf("stored session does not decode: %v", err)
	}
	if len(s.Stops) != 2 || s.End == nil || !s.End.Equal(mergeAt(14, 5)) || s.Outcome != "done" ||
		s.Summary != "interrupted by a call" || !slices.Equal(s.Notes, []string{"drafted the guide"}) {
		t.Errorf("stored session %s", a)
	}
}

func testMergeAllOrders(t *testing.T, h Harness) {
	reqs := []mergeSession{mergePhone, mergeLaptop, mergeWatch}
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	var first json.RawMessage
	for _, o := range orders {
		_, raw := deliverMerge(t, h, reqs[o[0]], reqs[o[1]], reqs[o[2]])
		if first == nil {
			first = raw
		} else if !bytes.Equal(raw, first) {
			t.Errorf("order %v stored\n%s\nwant (order %v)\n%s", o, raw, orders[0], first)
		}
	}
	var s mergeSession
	if err := json.Unmarshal(first, &s); err != nil {
		t.Fatalf("stored session does not decode: %v", err)
	}
	if len(s.Stops) != 3 || s.End == nil || !s.End.Equal(mergeAt(14, 5)) || s.Outcome != "done" {
		t.Errorf("stored session %s", first)
	}
}

// testMergeStartsDiffer: two devices disagree on when the session started
// (the watch's clock ran two minutes late) and reach a store without the
// session, in both orders: the earliest start is kept either way, and the
// first to arrive creates the record.
func testMergeStartsDiffer(t *testing.T, h Harness) {
	watch := mergeWatch
	watch.Start = mergeStart.Add(2 * time.Minute)
	var stored []json.RawMessage
	for _, reqs := range [][]mergeSession{{mergePhone, watch}, {watch, mergePhone}} {
		m := newMergeStore(t, h, false)
		for i, r := range reqs {
			ch, err := m.apply(r)
			if err != nil {
				t.Fatalf("request %d: Apply: %v", i, err)
			}
			if ch.Created != (i == 0) {
				t.Errorf("request %d: created=%v", i, ch.Created)
			}
		}
		raw, _ := m.raw()
		stored = append(stored, raw)
	}
	if !bytes.Equal(stored[0], stored[1]) {
		t.Fatalf("arrival order changed the stored record:\nphone then watch: %s\nwatch then phone: %s", stored[0], stored[1])
	}
	var s mergeSession
	if err := json.Unmarshal(stored[0], &s); err != nil {
		t.Fatalf("stored session does not decode: %v", err)
	}
	if !s.Start.Equal(mergeStart) || len(s.Stops) != 2 || s.End == nil || !s.End.Equal(mergeAt(14, 5)) {
		t.Errorf("stored session %s, want start %s", stored[0], mergeStart.Format("15:04"))
	}
}

func testMergeReplay(t *testing.T, h Harness) {
	m := newMergeStore(t, h, true)
	for _, r := range []mergeSession{mergeLaptop, mergePhone} {
		if _, err := m.apply(r); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	raw1, v1 := m.raw()
	for _, r := range []mergeSession{mergeLaptop, mergePhone} {
		ch, err := m.apply(r)
		if err != nil {
			t.Fatalf("replayed Apply: %v", err)
		}
		if ch.Changed || ch.Created || ch.Summary != "unchanged" {
			t.Errorf("replayed stop: %+v", ch)
		}
	}
	if raw2, v2 := m.raw(); v2 != v1 || !bytes.Equal(raw1, raw2) {
		t.Errorf("replayed stops wrote: version %d -> %d", v1, v2)
	}
}

func testMergeCreate(t *testing.T, h Harness) {
	m := newMergeStore(t, h, false)
	ch, err := m.apply(mergePhone)
	if err != nil {
		t.Fatalf("Apply on an absent record: %v", err)
	}
	if !ch.Created || !ch.Changed || ch.Summary != "created" {
		t.Errorf("change %+v", ch)
	}
	raw, _ := m.raw()
	var s mergeSession
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Stops) != 1 || s.End == nil || !s.End.Equal(mergeAt(14, 5)) {
		t.Errorf("stored %s (%v)", raw, err)
	}
}

// testMergeConcurrent: 16 devices stop one session at once, each in its own
// transaction; every stop must be on the session afterwards. Each first
// attempt waits after its read until all n have read (or briefly, on stores
// that run one transaction at a time), so the transactions really overlap
// and the conditional write and the retry are what keep every stop. With
// writeChecks the store checks only the writes' own conditions
// (writeChecksOnly), so that Apply's write at the version it read alone
// keeps every stop.
func testMergeConcurrent(t *testing.T, h Harness, writeChecks bool) {
	n := h.goroutines(16)
	m := newMergeStore(t, h, true)
	if writeChecks {
		m.s = &writeChecksOnly{Store: m.s}
	}
	var attempts, reached atomic.Int64
	allRead := make(chan struct{})
	errs := make([]error, n)
	start(n, func(i int) {
		op := fmt.Sprintf("op-%02d", i)
		in := mergeRequest(op, mergeStop{At: mergeAt(14, 10+i), Outcome: "done", Summary: op})
		first := true
		errs[i] = m.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			attempts.Add(1)
			if first {
				first = false
				tx = readBarrier{Tx: tx, wait: func() {
					if reached.Add(1) == int64(n) {
						close(allRead)
					}
					select {
					case <-allRead:
					case <-time.After(20 * time.Millisecond):
					}
				}}
			}
			_, err := merge.Apply(ctx, tx, mergeKey, in, mergeStopRule, &merge.Options[mergeSession]{Describe: mergeDescribe})
			return err
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("Apply %d: %v", i, err)
		}
	}
	if (writeChecks || !h.Serialized) && attempts.Load() <= int64(n) {
		t.Errorf("%d attempts for %d overlapping merges: no transaction lost a race, so the test proved nothing", attempts.Load(), n)
	}
	raw, _ := m.raw()
	var s mergeSession
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("stored session does not decode: %v", err)
	}
	var lost []string
	for i := range n {
		if _, ok := s.Stops[fmt.Sprintf("op-%02d", i)]; !ok {
			lost = append(lost, fmt.Sprintf("op-%02d", i))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d stops lost: %s", len(lost), n, strings.Join(lost, ", "))
	}
	if s.End == nil || !s.End.Equal(mergeAt(14, 10)) || s.Summary != "op-00" || len(s.Notes) != n-1 {
		t.Errorf("view after %d concurrent stops: end %v, summary %q, %d notes", n, s.End, s.Summary, len(s.Notes))
	}
}

// readBarrier calls wait after the first Get of the transaction it wraps.
type readBarrier struct {
	idem.Tx
	wait func()
}

func (r readBarrier) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	v, err := r.Tx.Get(ctx, k, dst)
	if r.wait != nil {
		r.wait()
	}
	return v, err
}
