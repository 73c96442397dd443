package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// dynamoDocLimit is the largest document the DynamoDB store takes, the
// smallest limit of the stores: its item limit, 400 KB, less what it keeps
// beside the document.
const dynamoDocLimit = 400<<10 - 2<<10

// The longest texts and ids the tools take, each in the characters that
// take the most room in a stored document: encoding/json writes '<' as
// \u003c, six bytes.
var (
	longLabel = strings.Repeat("<", maxLabel)
	longText  = strings.Repeat("<", maxText)
)

// longID is the i-th of distinct ids of 128 characters, checkID's longest.
func longID(prefix string, i int) string {
	s := fmt.Sprintf("%s%04d", prefix, i)
	return s + strings.Repeat("<", 128-len(s))
}

// newLimitHarness is a harness on a memory store that takes documents up
// to dynamoDocLimit bytes, as DynamoDB does.
func newLimitHarness(t *testing.T) *harness {
	t.Helper()
	s := memory.New(&memory.Options{MaxDocumentBytes: dynamoDocLimit})
	t.Cleanup(func() { s.Close() })
	srv, f := newFocus(s, Config{Now: func() time.Time { return demoNow }})
	return &harness{t: t, ctx: t.Context(), store: s, srv: srv, f: f, now: func() time.Time { return demoNow }}
}

// refusedForCap checks that res is a not_saved refusal whose message says
// the cap: the server's own, not the store's document limit.
func refusedForCap(t *testing.T, res *mcp.CallToolResult, cap string) {
	t.Helper()
	if codeOf(res) != string(idem.CodeNotSaved) || !strings.Contains(text(res), cap) {
		t.Fatalf("code %q (%.200s), want not_saved saying %q", codeOf(res), text(res), cap)
	}
}

// docSize returns the stored size of the document at key, failing the test
// if it is over dynamoDocLimit.
func (h *harness) docSize(key idem.Key) int {
	h.t.Helper()
	n := len(h.doc(key))
	if n == 0 || n > dynamoDocLimit {
		h.t.Fatalf("%s is %d bytes, want 1 to %d", key, n, dynamoDocLimit)
	}
	return n
}

// TestRunningIndexUnderTheLimit: a user with maxRunning-1 sessions running,
// each on a device with the longest id, the longest session id and the
// longest label, starts another; the running index stays under the
// stores' limit, and the start after it is refused by the server's cap,
// writing nothing.
func TestRunningIndexUnderTheLimit(t *testing.T) {
	h := newLimitHarness(t)
	cs := h.connect()
	for i := range maxRunning {
		h.ok(cs, "start_focus", map[string]any{"device": longID("device", i), "session_id": longID("session", i),
			"label": longLabel, "started_at": at("08:00")})
	}
	t.Logf("running index with %d sessions: %d bytes", maxRunning, h.docSize(k(colIndex, "running")))
	var now Now
	structured(t, h.ok(cs, "get_now", map[string]any{}), &now)
	if len(now.Running) != maxRunning || now.Running[0].Label != longLabel {
		t.Fatalf("get_now lists %d sessions, want %d with their labels", len(now.Running), maxRunning)
	}
	extra := longID("device", maxRunning)
	refusedForCap(t, h.call(cs, "start_focus", map[string]any{"device": extra, "label": longLabel, "started_at": at("08:00")}),
		fmt.Sprintf("%d sessions are running", maxRunning))
	if d := h.doc(k(colRunning, extra)); d != "" {
		t.Fatalf("the refused start wrote its device's slot: %s", d)
	}
}

// TestDayUnderTheLimit fills one date to every cap, with the longest ids,
// labels, summaries and notes: maxDaySessions sessions, each stopped,
// maxDayLogs logs and maxDayDevices devices' step counts. The day stays
// under the stores' limit; one more of each is refused by the server's
// cap, while a record the day holds is still replaced.
func TestDayUnderTheLimit(t *testing.T) {
	h := newLimitHarness(t)
	cs := h.connect()
	for i := range maxDaySessions {
		id := longID("session", i)
		h.ok(cs, "start_focus", map[string]any{"device": longID("device", i%maxRunning), "session_id": id,
			"label": longLabel, "started_at": at("08:00")})
		h.ok(cs, "end_focus", map[string]any{"session_id": id, "device": longID("device", i%maxRunning),
			"end_at": at("08:30"), "summary": longText})
	}
	for i := range maxDayLogs {
		h.ok(cs, "log_session", map[string]any{"log_id": longID("log", i), "minutes": 1, "note": longText,
			"started_at": fmt.Sprintf("2026-03-02T%02d:%02d:00Z", 10+i/60, i%60)})
	}
	for i := range maxDayDevices {
		h.ok(cs, "set_steps", map[string]any{"device": longID("device", i), "date": "2026-03-02", "steps": 100})
	}
	day := k(colDays, "2026-03-02")
	t.Logf("a day with %d sessions, %d logs and %d devices' steps: %d bytes", maxDaySessions, maxDayLogs, maxDayDevices, h.docSize(day))

	before := h.doc(day)
	refusedForCap(t, h.call(cs, "start_focus", map[string]any{"device": "phone", "label": "x", "started_at": at("09:00")}),
		fmt.Sprintf("%d sessions were started on this date", maxDaySessions))
	refusedForCap(t, h.call(cs, "log_session", map[string]any{"log_id": "one-more", "minutes": 1, "started_at": at("14:00")}),
		fmt.Sprintf("%d logs are kept for this date", maxDayLogs))
	refusedForCap(t, h.call(cs, "set_steps", map[string]any{"device": "one-more", "date": "2026-03-02", "steps": 1}),
		fmt.Sprintf("%d devices have step counts for this date", maxDayDevices))
	if after := h.doc(day); after != before {
		t.Fatal("a refused call changed the day")
	}
	h.ok(cs, "log_session", map[string]any{"log_id": longID("log", 0), "minutes": 1, "note": "replaced", "started_at": at("10:00")})
	h.ok(cs, "set_steps", map[string]any{"device": longID("device", 0), "date": "2026-03-02", "steps": 200})
	h.ok(cs, "start_focus", map[string]any{"device": "phone", "label": "x", "started_at": "2026-03-01T09:00:00Z"})

	var d Day
	structured(t, h.ok(cs, "list_sessions", map[string]any{"date": "2026-03-02"}), &d)
	if len(d.Sessions) != maxDaySessions || len(d.Logs) != maxDayLogs || d.Logs[0].Note != "replaced" || d.Logs[1].Note != longText {
		t.Fatalf("list_sessions: %d sessions and %d logs (notes %.10q, %.10q), want %d and %d with their notes",
			len(d.Sessions), len(d.Logs), d.Logs[0].Note, d.Logs[1].Note, maxDaySessions, maxDayLogs)
	}
}

// TestSessionStopsUnderTheLimit: maxStops devices stop one session, each
// with another summary of the longest kind; the session stays under the
// stores' limit, a device's repeat is still answered, and one more device
// is refused by the server's cap.
func TestSessionStopsUnderTheLimit(t *testing.T) {
	h := newLimitHarness(t)
	cs := h.connect()
	id := longID("session", 0)
	h.ok(cs, "start_focus", map[string]any{"device": longID("device", 0), "session_id": id, "label": longLabel, "started_at": at("08:00")})
	stop := func(i int) map[string]any {
		summary := fmt.Sprintf("%04d", i) + longText[4:]
		return map[string]any{"session_id": id, "device": longID("device", i), "end_at": at(fmt.Sprintf("09:%02d", i)), "summary": summary}
	}
	for i := range maxStops {
		h.ok(cs, "end_focus", stop(i))
	}
	s := h.session("", id)
	t.Logf("a session with %d stops and %d notes: %d bytes", len(s.Stops), len(s.Notes), h.docSize(k(colSessions, id)))
	h.ok(cs, "end_focus", stop(maxStops-1))
	refusedForCap(t, h.call(cs, "end_focus", stop(maxStops)), fmt.Sprintf("%d devices have stopped this session", maxStops))
	if got := h.session("", id); len(got.Stops) != maxStops {
		t.Fatalf("%d stops kept, want %d", len(got.Stops), maxStops)
	}
}

// TestLongTextRefusedBeforeAnythingIsWritten: a label, summary or note of
// one character more than the schema states is refused with
// invalid_arguments before the handler runs, quoting nothing; one of as
// many characters as allowed, each of four bytes, is taken.
func TestLongTextRefusedBeforeAnythingIsWritten(t *testing.T) {
	h := newHarness(t, "memory")
	cs := h.connect()
	h.ok(cs, "start_focus", start("phone", "s1", at("13:30")))
	keys := []idem.Key{k(colSessions, "s1"), k(colIndex, "running"), k(colRunning, "laptop"), k(colDays, "2026-03-02"),
		k(colLogs, "l1"), k(colHeartbeats, "s1@"+at("13:50"))}
	over := func(n int) string { return "SENTINEL" + strings.Repeat("x", n+1-len("SENTINEL")) }
	for _, c := range []struct {
		tool, arg string
		max       int
		args      map[string]any
	}{
		{"start_focus", "label", maxLabel, map[string]any{"device": "laptop"}},
		{"end_focus", "summary", maxText, map[string]any{"session_id": "s1", "device": "phone", "end_at": at("14:00")}},
		{"log_session", "note", maxText, map[string]any{"log_id": "l1", "started_at": at("07:00"), "minutes": 5}},
		{"heartbeat", "note", maxText, map[string]any{"session_id": "s1", "at": at("13:50")}},
	} {
		before := h.snapshot(keys)
		ran, _ := h.f.Runs(c.tool)
		c.args[c.arg] = over(c.max)
		res := h.call(cs, c.tool, c.args)
		if codeOf(res) != string(idem.CodeInvalidArguments) || strings.Contains(text(res), "SENTINEL") || strings.Contains(text(res), "xxxx") {
			t.Errorf("%s with a %s of %d characters: code %q (%.200s), want invalid_arguments quoting nothing", c.tool, c.arg, c.max+1, codeOf(res), text(res))
		}
		if after, _ := h.f.Runs(c.tool); after != ran {
			t.Errorf("%s: the handler ran on a %s over the schema's bound", c.tool, c.arg)
		}
		if after := h.snapshot(keys); !mapsEqual(before, after) {
			t.Errorf("%s: the refused call wrote:\n%v\n%v", c.tool, before, after)
		}
		c.args[c.arg] = strings.Repeat("🙂", c.max)
		h.ok(cs, c.tool, c.args)
	}
}

// TestHandlersRefuseLongText: each handler refuses a text over its bound
// itself, for a call that reaches it without the schema's check.
func TestHandlersRefuseLongText(t *testing.T) {
	h := newHarness(t, "memory")
	long := func(n int) string { return strings.Repeat("é", n+1) }
	for name, call := range map[string]func(ctx context.Context, tx idem.Tx) error{
		"start_focus label": func(ctx context.Context, tx idem.Tx) error {
			_, _, err := h.f.startFocus(ctx, tx, nil, StartArgs{Device: "phone", Label: long(maxLabel)})
			return err
		},
		"end_focus summary": func(ctx context.Context, tx idem.Tx) error {
			_, _, err := h.f.endFocus(ctx, tx, nil, EndArgs{Device: "phone", Summary: long(maxText)})
			return err
		},
		"log_session note": func(ctx context.Context, tx idem.Tx) error {
			_, _, err := h.f.logSession(ctx, tx, nil, LogArgs{LogID: "l1", StartedAt: at("07:00"), Minutes: 5, Note: long(maxText)})
			return err
		},
		"heartbeat note": func(ctx context.Context, tx idem.Tx) error {
			_, _, err := h.f.heartbeat(ctx, tx, nil, BeatArgs{SessionID: "s1", At: at("07:00"), Note: long(maxText)})
			return err
		},
	} {
		err := h.store.Run(h.ctx, call)
		if idem.CodeOf(err) != idem.CodeInvalidArguments || strings.Contains(err.Error(), "é") {
			t.Errorf("%s over its bound: %v, want invalid_arguments quoting nothing", name, err)
		}
	}
	if d := h.doc(k(colRunning, "phone")); d != "" {
		t.Fatalf("a refused start wrote %s", d)
	}
}

// TestSchemaStatesTextBounds: the label, summaries and notes have their
// bound in the input schema, where a client reads it.
func TestSchemaStatesTextBounds(t *testing.T) {
	tools := listed(t, newHarness(t, "memory"))
	for _, c := range []struct {
		tool, arg string
		max       int
	}{
		{"start_focus", "label", maxLabel},
		{"end_focus", "summary", maxText},
		{"log_session", "note", maxText},
		{"heartbeat", "note", maxText},
	} {
		if got := tools.Prop(t, c.tool, c.arg)["maxLength"]; got != float64(c.max) {
			t.Errorf("%s %s: maxLength %v, want %d", c.tool, c.arg, got, c.max)
		}
	}
}
