package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/idemtest"
)

// k is a key of the stdio user (no owner).
func k(collection, id string) idem.Key { return idem.Key{Collection: collection, ID: id} }

// A write is one write tool's call, the set-up it needs, and the documents
// it touches.
type write struct {
	name  string
	tool  string
	setup []callSpec
	args  map[string]any
	keys  []idem.Key
}

// A callSpec is a call to make before the one under test.
type callSpec struct {
	tool string
	args map[string]any
}

// writes lists a call of every write tool, with each way a repeat is
// recognised: a record key, an op id, or the device's running slot.
func writes() []write {
	started := []callSpec{{"start_focus", start("phone", "s1", at("13:30"))}}
	session := []idem.Key{k(colSessions, "s1"), k(colRunning, "phone"), k(colIndex, "running"), k(colDays, "2026-03-02")}
	return []write{
		{name: "start_focus_session_id", tool: "start_focus", args: start("phone", "s1", at("13:30")), keys: session},
		{name: "start_focus_no_id", tool: "start_focus", args: start("phone", "", at("13:30")),
			keys: []idem.Key{k(colRunning, "phone"), k(colIndex, "running"), k(colDays, "2026-03-02")}},
		{name: "start_focus_op_id", tool: "start_focus", args: withOp(start("phone", "", at("13:30")), "op-start"),
			keys: []idem.Key{k(colRunning, "phone"), k(colIndex, "running"), k(colDays, "2026-03-02")}},
		{name: "end_focus_session_id", tool: "end_focus", setup: started, args: map[string]any{"session_id": "s1", "device": "laptop", "end_at": at("14:20"), "summary": "done"}, keys: session},
		{name: "end_focus_op_id", tool: "end_focus", setup: started, args: map[string]any{"session_id": "s1", "device": "phone", "end_at": at("14:05"), "outcome": "abandoned", "op_id": "op-stop"}, keys: session},
		{name: "delete_session", tool: "delete_session", setup: started, args: map[string]any{"session_id": "s1"}, keys: session},
		{name: "log_session", tool: "log_session", args: map[string]any{"log_id": "walk-1", "started_at": at("07:00"), "minutes": 25, "note": "walk"},
			keys: []idem.Key{k(colLogs, "walk-1"), k(colDays, "2026-03-02")}},
		{name: "add_steps", tool: "add_steps", args: map[string]any{"date": "2026-03-02", "steps": 1200, "op_id": "op-steps"},
			keys: []idem.Key{k(colDays, "2026-03-02")}},
		{name: "set_steps", tool: "set_steps", args: map[string]any{"device": "phone", "date": "2026-03-02", "steps": 1200},
			keys: []idem.Key{k(colDays, "2026-03-02")}},
		{name: "set_steps_op_id", tool: "set_steps", args: map[string]any{"device": "phone", "date": "2026-03-02", "steps": 1200, "op_id": "op-set"},
			keys: []idem.Key{k(colDays, "2026-03-02")}},
		{name: "heartbeat", tool: "heartbeat", setup: started, args: map[string]any{"session_id": "s1", "at": at("13:50"), "note": "outline done"},
			keys: append(session, k(colHeartbeats, "s1@"+at("13:50")))},
	}
}

func withOp(m map[string]any, op string) map[string]any {
	m["op_id"] = op
	return m
}

// eachWrite runs fn for every write of writes() on every store, each on
// its own user's records (a fresh store per case would cost a table per
// case on the services), after the write's set-up calls.
func eachWrite(t *testing.T, fn func(t *testing.T, h *harness, cs *mcp.ClientSession, w write)) {
	eachStore(t, func(t *testing.T, h *harness) {
		for _, w := range writes() {
			t.Run(w.name, func(t *testing.T) {
				h := h.asUser(t, w.name)
				cs := h.connect()
				for _, s := range w.setup {
					h.ok(cs, s.tool, s.args)
				}
				fn(t, h, cs, w)
			})
		}
	})
}

// TestSendTwice sends each write tool's call twice (the same key or the
// same op id): the same answer, and every document it touches unchanged by
// the second call.
func TestSendTwice(t *testing.T) {
	eachWrite(t, func(t *testing.T, h *harness, cs *mcp.ClientSession, w write) {
		first := h.ok(cs, w.tool, w.args)
		before := h.snapshot(h.owned(w.keys))
		second := h.ok(cs, w.tool, w.args)
		if err := idemtest.SameAnswer(first, second); err != nil {
			t.Errorf("the second answer differs: %v", err)
		}
		after := h.snapshot(h.owned(w.keys))
		for key, b := range before {
			if after[key] != b {
				t.Errorf("%s changed on the second call:\n%s\n%s", key, b, after[key])
			}
		}
		if w.tool == "start_focus" {
			var now Now
			structured(t, h.ok(cs, "get_now", map[string]any{}), &now)
			if len(now.Running) != 1 {
				t.Errorf("%d running sessions after two starts, want 1: %+v", len(now.Running), now.Running)
			}
		}
	})
}

// TestDropAndRetry loses the answer of each write tool after its commit,
// reconnects and sends it again: one execution. A call with an op id is
// answered from the stored result without running the handler; a keyed
// call runs again and writes the same record.
func TestDropAndRetry(t *testing.T) {
	eachWrite(t, func(t *testing.T, h *harness, _ *mcp.ClientSession, w write) {
		ran0, com0 := h.f.Runs(w.tool)
		d := &idemtest.Dropper{Tool: w.tool}
		lossy, err := idemtest.Connect(h.ctx, h.srv, d.Wrap)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lossy.CallTool(h.ctx, &mcp.CallToolParams{Name: w.tool, Arguments: w.args}); err == nil || d.Dropped() != 1 {
			t.Fatalf("the first answer was not lost: %v", err)
		}
		lossy.Close()
		_, com1 := h.f.Runs(w.tool)
		committed := h.snapshot(h.owned(w.keys))
		res := h.ok(h.connect(), w.tool, w.args)
		ran2, com2 := h.f.Runs(w.tool)
		if com1-com0 != 1 {
			t.Fatalf("the lost call committed %d times, want 1", com1-com0)
		}
		if _, hasOp := w.args["op_id"]; hasOp {
			if ran2-ran0 != 1 || com2-com0 != 1 || res.Meta[idem.MetaReplayed] != true {
				t.Errorf("op id retry: handler ran %d times, committed %d, replayed %v; want 1, 1, true", ran2-ran0, com2-com0, res.Meta[idem.MetaReplayed])
			}
		}
		for _, key := range h.owned(w.keys) {
			if got := h.doc(key); got != committed[key.String()] {
				t.Errorf("%s changed on the retry:\n%s\n%s", key, committed[key.String()], got)
			}
		}
	})
}

// TestTwoDeviceStopBothOrders stops one session from a phone (14:05,
// queued, abandoned) and a laptop (14:20, done) in both arrival orders, and
// three devices in all six orders: every order stores the same session,
// ended at 14:05, outcome done, every stop kept.
func TestTwoDeviceStopBothOrders(t *testing.T) {
	stops := map[string]map[string]any{
		"phone":  {"device": "phone", "end_at": at("14:05"), "outcome": "abandoned", "summary": "a call came in", "op_id": "op-phone"},
		"watch":  {"device": "watch", "end_at": at("14:12"), "outcome": "interrupted", "summary": "drafted the chapter"},
		"laptop": {"device": "laptop", "end_at": at("14:20"), "outcome": "done", "summary": "drafted the chapter"},
	}
	eachStore(t, func(t *testing.T, h *harness) {
		cs := h.connect()
		run := func(orders [][]string) {
			t.Helper()
			var want string
			for i, order := range orders {
				id := fmt.Sprintf("s-%d-%s", len(order), strings.Join(order, "-"))
				h.ok(cs, "start_focus", start(fmt.Sprintf("desk-%d-%d", len(order), i), id, at("13:30")))
				var answers []Ended
				for _, dev := range order {
					args := map[string]any{"session_id": id}
					for k, v := range stops[dev] {
						args[k] = v
					}
					args["op_id"] = fmt.Sprint(args["op_id"], "-", id)
					if args["op_id"] == "<nil>-"+id {
						delete(args, "op_id")
					}
					var e Ended
					structured(t, h.ok(cs, "end_focus", args), &e)
					answers = append(answers, e)
				}
				s := h.session("", id)
				if s.End == nil || !s.End.Equal(time.Date(2026, 3, 2, 14, 5, 0, 0, time.UTC)) || s.Outcome != "done" ||
					len(s.Stops) != len(order) || s.Summary != "a call came in" || !slices.Equal(s.Notes, []string{"drafted the chapter"}) {
					t.Errorf("order %v: end %v outcome %q summary %q notes %q, %d stops", order, s.End, s.Outcome, s.Summary, s.Notes, len(s.Stops))
				}
				if order[len(order)-1] == "phone" && answers[len(answers)-1].Result != "shortened" {
					t.Errorf("order %v: the late phone stop answered %+v, want shortened", order, answers[len(answers)-1])
				}
				// The same record byte for byte, apart from what tells the
				// sessions apart: id, device, and the op ids in the keys.
				s.ID, s.Device, s.Label = "", "", ""
				stops := map[string]Stop{}
				for key, st := range s.Stops {
					stops[strings.TrimSuffix(key, "-"+id)] = st
				}
				s.Stops = stops
				got := fmt.Sprintf("%+v", s)
				if i == 0 {
					want = got
				} else if got != want {
					t.Errorf("order %v stored\n%s\nwant (order %v)\n%s", order, got, orders[0], want)
				}
				if running := h.doc(k(colRunning, fmt.Sprintf("desk-%d-%d", len(order), i))); running != "" {
					t.Errorf("order %v: the device's running slot is still taken: %s", order, running)
				}
			}
		}
		run([][]string{{"laptop", "phone"}, {"phone", "laptop"}})
		run(permutations([]string{"phone", "watch", "laptop"}))
	})
}

func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{slices.Clone(xs)}
	}
	var out [][]string
	for i, x := range xs {
		rest := slices.Concat(xs[:i], xs[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]string{x}, p...))
		}
	}
	return out
}

// TestNoIDIsRefusedWithCandidates, over stateless HTTP, every call on a
// connection of its own: a stop or delete without a session id from a
// device that runs nothing is refused with every running session and its
// id, quoting none of the call's values; one from the device that runs a
// session acts on that session, but not when the call is queued, and its
// repeat acts on nothing else. get_now marks the caller's device's session
// as yours.
func TestNoIDIsRefusedWithCandidates(t *testing.T) {
	const sentinel = "SENTINEL-9c2e"
	eachStore(t, func(t *testing.T, h *harness) {
		h.overHTTP()
		h.ok(h.connectHTTP(), "start_focus", start("phone", "s-phone", at("13:30")))
		h.ok(h.connectHTTP(), "start_focus", start("laptop", "s-laptop", at("13:40")))
		h.ok(h.connectHTTP(), "start_focus", start("desk", "s-desk", at("13:50")))
		want := []string{"s-desk", "s-laptop", "s-phone"}
		refused := func(tool string, args map[string]any, wantIDs []string) {
			t.Helper()
			before := h.snapshot([]idem.Key{k(colSessions, "s-phone"), k(colSessions, "s-laptop"), k(colSessions, "s-desk"), k(colIndex, "running")})
			res := h.call(h.connectHTTP(), tool, args)
			if !res.IsError || codeOf(res) != string(target.CodeAmbiguous) {
				t.Fatalf("%s %v: isError %v code %q, want ambiguous_target: %s", tool, args, res.IsError, codeOf(res), text(res))
			}
			if got := candidateIDs(t, res); !slices.Equal(got, wantIDs) {
				t.Errorf("%s: candidates %v, want %v", tool, got, wantIDs)
			}
			for _, id := range wantIDs {
				if !strings.Contains(text(res), id) {
					t.Errorf("%s: the text does not name candidate %s: %s", tool, id, text(res))
				}
			}
			if strings.Contains(text(res), sentinel) || strings.Contains(fmt.Sprint(res.Meta), sentinel) {
				t.Errorf("%s: the refusal quotes a value of the call: %s", tool, text(res))
			}
			after := h.snapshot([]idem.Key{k(colSessions, "s-phone"), k(colSessions, "s-laptop"), k(colSessions, "s-desk"), k(colIndex, "running")})
			if !mapsEqual(before, after) {
				t.Errorf("%s: a refused call changed the store", tool)
			}
		}
		var now Now
		structured(t, h.ok(h.connectHTTP(), "get_now", map[string]any{"device": "desk"}), &now)
		for _, r := range now.Running {
			if r.Yours != (r.SessionID == "s-desk") {
				t.Errorf("get_now from the desk: %s yours=%v", r.SessionID, r.Yours)
			}
		}
		// A device that runs nothing, and a call that names no device.
		refused("end_focus", map[string]any{"device": sentinel, "summary": sentinel}, want)
		refused("delete_session", map[string]any{}, want)
		refused("delete_session", map[string]any{"device": "watch"}, want)
		// The desk runs one, but a queued call must name it.
		refused("end_focus", map[string]any{"device": "desk", "end_at": at("14:00")}, want)
		refused("end_focus", map[string]any{"device": "desk", "op_id": "op-c"}, want)
		// The desk's plain stop stops its own session; its repeat (a
		// client's resend, a model's retry) is answered that stop, and
		// stops nothing else.
		var e, again Ended
		structured(t, h.ok(h.connectHTTP(), "end_focus", map[string]any{"device": "desk"}), &e)
		if e.SessionID != "s-desk" {
			t.Fatalf("stopped %s, want s-desk", e.SessionID)
		}
		before := h.snapshot([]idem.Key{k(colSessions, "s-phone"), k(colSessions, "s-laptop"), k(colSessions, "s-desk"), k(colIndex, "running")})
		structured(t, h.ok(h.connectHTTP(), "end_focus", map[string]any{"device": "desk"}), &again)
		if again.SessionID != "s-desk" || again.Result != e.Result || !again.End.Equal(e.End) {
			t.Fatalf("the repeat of the desk's stop answered %+v, want its stop %+v", again, e)
		}
		if after := h.snapshot([]idem.Key{k(colSessions, "s-phone"), k(colSessions, "s-laptop"), k(colSessions, "s-desk"), k(colIndex, "running")}); !mapsEqual(before, after) {
			t.Errorf("the repeat of the desk's stop changed the store")
		}
		// Queued, it must name its session still.
		refused("end_focus", map[string]any{"device": "desk", "op_id": "op-d"}, []string{"s-laptop", "s-phone"})
		refused("delete_session", map[string]any{"device": "desk"}, []string{"s-laptop", "s-phone"})
		// The laptop's delete without an id deletes the laptop's session.
		var d Deleted
		structured(t, h.ok(h.connectHTTP(), "delete_session", map[string]any{"device": "laptop"}), &d)
		if d.SessionID != "s-laptop" || !h.session("", "s-laptop").Deleted {
			t.Fatalf("the laptop's delete without an id: %+v", d)
		}
		if !h.session("", "s-phone").Running() {
			t.Errorf("s-phone was stopped by a call that did not name it")
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestEventTime: a stop queued at 14:05 and delivered at 16:40 is recorded
// at 14:05; one before the session's start is refused; one ahead of the
// server's clock is clamped to it.
func TestEventTime(t *testing.T) {
	h := newHarness(t, "memory")
	cs := h.connect()
	for i, c := range []struct {
		endAt   string
		wantEnd string
		code    idem.Code
	}{
		{at("14:05"), at("16:40")[:0] + at("14:05"), ""},
		{at("12:00"), "", target.CodeEventBeforeStart},
		{at("18:00"), at("16:40"), ""},
	} {
		id := fmt.Sprintf("s%d", i)
		h.ok(cs, "start_focus", start(fmt.Sprintf("d%d", i), id, at("13:30")))
		res := h.call(cs, "end_focus", map[string]any{"session_id": id, "device": "phone", "end_at": c.endAt})
		if c.code != "" {
			if codeOf(res) != string(c.code) || h.session("", id).End != nil {
				t.Errorf("end_at %s: code %q, end %v; want %s and no end", c.endAt, codeOf(res), h.session("", id).End, c.code)
			}
			continue
		}
		if res.IsError {
			t.Fatalf("end_at %s: %s", c.endAt, text(res))
		}
		if got := h.session("", id).End.Format(time.RFC3339); got != c.wantEnd {
			t.Errorf("end_at %s delivered at 16:40: recorded %s, want %s", c.endAt, got, c.wantEnd)
		}
	}
}

// TestAnnotations: idempotentHint only where every repeat is harmless,
// readOnlyHint on the reads, openWorldHint false on every tool (each
// touches the server's store alone), and descriptions that name the keys
// and who mints op_id.
func TestAnnotations(t *testing.T) {
	h := newHarness(t, "memory")
	res, err := h.connect().ListTools(h.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]bool{ // idempotent, read-only
		"start_focus": {true, false}, "end_focus": {true, false}, "delete_session": {true, false},
		"log_session": {true, false}, "add_steps": {true, false}, "set_steps": {true, false}, "heartbeat": {true, false},
		"get_now": {true, true}, "list_sessions": {true, true}, "get_operation": {true, true},
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if tool.Annotations.IdempotentHint != w[0] || tool.Annotations.ReadOnlyHint != w[1] {
			t.Errorf("%s: idempotentHint %v readOnlyHint %v, want %v %v", tool.Name, tool.Annotations.IdempotentHint, tool.Annotations.ReadOnlyHint, w[0], w[1])
		}
		if ow := tool.Annotations.OpenWorldHint; ow == nil || *ow {
			t.Errorf("%s: openWorldHint %v, want false", tool.Name, ow)
		}
		// What can replace or cut short what was there says so.
		destructive := map[string]bool{"end_focus": true, "delete_session": true, "log_session": true, "set_steps": true}[tool.Name]
		if d := tool.Annotations.DestructiveHint; !w[1] && (d == nil || *d != destructive) {
			t.Errorf("%s: destructiveHint %v, want %v", tool.Name, d, destructive)
		}
	}
	if len(names) != len(want) {
		t.Errorf("tools %v, want %d", names, len(want))
	}
	for tool, words := range map[string][]string{
		"add_steps": {"op_id", "set_steps", "not models"}, "set_steps": {"device", "date", "safe to send again"}, "log_session": {"log_id", "started_at", "overlap"}, "heartbeat": {"session_id", "at"}, "start_focus": {"op_id", "session_id"},
	} {
		i := slices.IndexFunc(res.Tools, func(x *mcp.Tool) bool { return x.Name == tool })
		for _, w := range words {
			if !strings.Contains(res.Tools[i].Description, w) {
				t.Errorf("%s: description does not mention %s: %s", tool, w, res.Tools[i].Description)
			}
		}
	}
}

// TestAddStepsRequiresOpID: add_steps without an op id is refused and adds
// nothing.
func TestAddStepsRequiresOpID(t *testing.T) {
	h := newHarness(t, "memory")
	cs := h.connect()
	res := h.call(cs, "add_steps", map[string]any{"date": "2026-03-02", "steps": 10})
	if !res.IsError || codeOf(res) != string(idem.CodeInvalidOpID) {
		t.Fatalf("add_steps without op_id: isError %v code %q", res.IsError, codeOf(res))
	}
	if d := h.doc(k(colDays, "2026-03-02")); d != "" {
		t.Fatalf("a refused add_steps wrote %s", d)
	}
}

// TestBadInput: bad arguments get a clear refusal that quotes no value and
// changes nothing.
func TestBadInput(t *testing.T) {
	const bad = "SENTINEL/4b1d"
	h := newHarness(t, "memory")
	cs := h.connect()
	h.ok(cs, "start_focus", start("phone", "s1", at("13:30")))
	before := h.snapshot([]idem.Key{k(colSessions, "s1"), k(colIndex, "running"), k(colDays, "2026-03-02")})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"start_focus", map[string]any{"device": bad, "label": "x"}},
		{"start_focus", map[string]any{"device": "phone", "label": "x", "session_id": bad}},
		{"start_focus", map[string]any{"device": "tablet", "label": "x", "started_at": bad}},
		{"start_focus", map[string]any{"device": "phone", "label": "x", "session_id": "s2"}},
		{"end_focus", map[string]any{"session_id": "s1", "device": "phone", "outcome": bad}},
		{"end_focus", map[string]any{"session_id": "s1", "device": "phone", "end_at": bad}},
		{"end_focus", map[string]any{"session_id": "nope", "device": "phone"}},
		{"delete_session", map[string]any{"session_id": "nope"}},
		{"log_session", map[string]any{"log_id": "l1", "started_at": bad, "minutes": 5}},
		{"log_session", map[string]any{"log_id": "l1", "started_at": at("07:00"), "minutes": 0}},
		{"log_session", map[string]any{"log_id": "l1", "minutes": 5}},
		{"add_steps", map[string]any{"date": "2026-03-02", "steps": -3, "op_id": "op-bad"}},
		{"set_steps", map[string]any{"device": "phone", "date": "2026-03-02", "steps": -3}},
		{"set_steps", map[string]any{"device": "phone", "date": "2026-03-02", "steps": 200001}},
		{"set_steps", map[string]any{"device": bad, "date": "2026-03-02", "steps": 3}},
		{"set_steps", map[string]any{"device": "phone", "date": bad, "steps": 3}},
		{"get_now", map[string]any{"device": bad}},
		{"delete_session", map[string]any{"device": bad}},
		{"heartbeat", map[string]any{"session_id": "s1", "at": bad, "note": "x"}},
		{"heartbeat", map[string]any{"session_id": "s1", "at": at("12:00"), "note": "x"}},
		{"list_sessions", map[string]any{"date": bad}},
	} {
		res := h.call(cs, c.tool, c.args)
		if !res.IsError || codeOf(res) == "" {
			t.Errorf("%s %v: isError %v code %q, want a refusal", c.tool, c.args, res.IsError, codeOf(res))
		}
		if strings.Contains(text(res), "SENTINEL") {
			t.Errorf("%s: the refusal quotes the value: %s", c.tool, text(res))
		}
	}
	if after := h.snapshot([]idem.Key{k(colSessions, "s1"), k(colIndex, "running"), k(colDays, "2026-03-02")}); !mapsEqual(before, after) {
		t.Errorf("refused calls changed the store:\n%v\n%v", before, after)
	}
}

// TestParallelStarts: 16 starts at once on one device, without a session
// id: one session runs, and every call answers it.
func TestParallelStarts(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		cs := h.connect()
		const n = 16
		answers := make([]Started, n)
		errs := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "start_focus", Arguments: start("phone", "", "")})
				switch {
				case err != nil:
					errs[i] = err.Error()
				case res.IsError:
					errs[i] = text(res)
				default:
					raw, _ := json.Marshal(res.StructuredContent)
					_ = json.Unmarshal(raw, &answers[i])
				}
			})
		}
		wg.Wait()
		for i, e := range errs {
			if e != "" {
				t.Fatalf("call %d: %s", i, e)
			}
		}
		for i, a := range answers {
			if a.SessionID != answers[0].SessionID {
				t.Errorf("call %d answered %s, call 0 %s", i, a.SessionID, answers[0].SessionID)
			}
		}
		var now Now
		structured(t, h.ok(cs, "get_now", map[string]any{}), &now)
		if len(now.Running) != 1 {
			t.Errorf("%d sessions running after %d parallel starts on one device, want 1", len(now.Running), n)
		}
	})
}
