package interop_test

import (
	"slices"
	"strings"
	"testing"
)

// focusWrites is a call of each of examples/focus's write tools, by the id
// of its step: each is sent twice on one session and once more on a new
// session (over stdio, a new server process on the same database).
var focusWrites = []struct {
	id, tool string
	args     map[string]any
	replayed bool // answered from a stored op record
}{
	{"start", "start_focus", map[string]any{"device": "phone", "label": "chapter", "session_id": "s1", "started_at": "2026-03-02T13:30:00Z", "op_id": "op-start"}, true},
	{"heartbeat", "heartbeat", map[string]any{"session_id": "s1", "at": "2026-03-02T13:50:00Z", "note": "outline done"}, false},
	{"log", "log_session", map[string]any{"log_id": "walk-1", "started_at": "2026-03-02T07:00:00Z", "minutes": 25, "note": "walk"}, false},
	{"steps", "add_steps", map[string]any{"date": "2026-03-02", "steps": 1200, "op_id": "op-steps"}, true},
	{"device_steps", "set_steps", map[string]any{"device": "watch", "date": "2026-03-02", "steps": 900}, false},
	{"end", "end_focus", map[string]any{"session_id": "s1", "device": "phone", "end_at": "2026-03-02T14:05:00Z", "outcome": "done", "op_id": "op-stop"}, true},
	{"start2", "start_focus", map[string]any{"device": "laptop", "label": "review", "session_id": "s2", "started_at": "2026-03-02T14:10:00Z"}, false},
	{"delete", "delete_session", map[string]any{"session_id": "s2"}, false},
}

// focusPlan runs every write twice on one session, then the refusals, then
// every write again on a new session.
func focusPlan() plan {
	first := []step{list("list")}
	var again []step
	for _, w := range focusWrites {
		first = append(first, call(w.id+"_first", w.tool, w.args), call(w.id+"_twice", w.tool, w.args))
		again = append(again, call(w.id+"_new_session", w.tool, w.args))
	}
	// s3 runs, started on the first session; the second, a new
	// connection, owns nothing, so a stop or delete without an id from it is
	// refused with the candidates.
	again = append(again,
		call("end_no_id", "end_focus", map[string]any{"device": sentinel, "summary": sentinel}),
		call("delete_no_id", "delete_session", map[string]any{}))
	first = append(first,
		call("start3", "start_focus", map[string]any{"device": "desk", "label": "email", "session_id": "s3"}),
		call("log_missing_key", "log_session", map[string]any{"started_at": "2026-03-02T08:00:00Z", "minutes": 5}),
		call("steps_no_op_id", "add_steps", map[string]any{"date": "2026-03-02", "steps": 5}),
		call("set_steps_no_device", "set_steps", map[string]any{"date": "2026-03-02", "steps": 5}),
		call("stop_before_start", "end_focus", map[string]any{"session_id": "s3", "device": "desk", "end_at": "2000-01-01T00:00:00Z"}),
	)
	again = append(again, call("now", "get_now", map[string]any{}), call("day", "list_sessions", map[string]any{"date": "2026-03-02"}))
	return plan{Sessions: []session{{Steps: first}, {Steps: again}}}
}

var focusChecks = []check{
	{"list_tools", func(t *testing.T, out map[string]outcome) {
		listsTools(t, out["list"], "start_focus", "end_focus", "delete_session", "log_session", "add_steps", "set_steps", "heartbeat",
			"get_now", "list_sessions", "get_operation")
	}},
	{"no_boolean_subschemas", func(t *testing.T, out map[string]outcome) {
		noBooleanSubschemas(t, out["list"])
	}},
	{"send_twice", func(t *testing.T, out map[string]outcome) {
		for _, w := range focusWrites {
			sameAnswer(t, out, w.id+"_first", w.id+"_twice", w.replayed)
		}
	}},
	{"retry_new_session", func(t *testing.T, out map[string]outcome) {
		for _, w := range focusWrites {
			sameAnswer(t, out, w.id+"_first", w.id+"_new_session", w.replayed)
		}
	}},
	{"counted_once", func(t *testing.T, out map[string]outcome) {
		var day struct {
			Sessions      []any `json:"sessions"`
			LoggedMinutes int   `json:"logged_minutes"`
			Steps         int   `json:"steps"`
		}
		if err := remarshal(result(t, out, "day").StructuredContent, &day); err != nil {
			t.Fatal(err)
		}
		if day.Steps != 2100 || day.LoggedMinutes != 25 || len(day.Sessions) != 1 {
			t.Errorf("the day after every write three times: %d steps, %d minutes, %d sessions; want 2100 (1200 added, 900 set), 25, 1 (s2 deleted)",
				day.Steps, day.LoggedMinutes, len(day.Sessions))
		}
	}},
	{"no_id_refused_with_candidates", func(t *testing.T, out map[string]outcome) {
		for _, id := range []string{"end_no_id", "delete_no_id"} {
			r := refused(t, out, id, "ambiguous_target")
			if !strings.Contains(r.text(), `"id":"s3"`) {
				t.Errorf("%s: the refusal does not list s3: %s", id, r.text())
			}
			if strings.Contains(string(r.raw), sentinel) {
				t.Errorf("%s: the refusal echoes an argument: %s", id, r.raw)
			}
		}
	}},
	{"refusals", func(t *testing.T, out map[string]outcome) {
		refused(t, out, "log_missing_key", "missing_key")
		refused(t, out, "steps_no_op_id", "invalid_op_id")
		refused(t, out, "set_steps_no_device", "missing_key")
		refused(t, out, "stop_before_start", "event_before_start")
	}},
	{"honest_idempotent_hint", func(t *testing.T, out map[string]outcome) {
		// Every write is idempotent: keyed (start_focus and end_focus by the
		// device's slot and stop, log_session, heartbeat), a required op id
		// (add_steps), or by its own logic (delete_session: a tombstone, and
		// no guessed target). A tool with an optional op id must have keys.
		for _, name := range []string{"start_focus", "end_focus", "delete_session", "log_session", "add_steps", "set_steps", "heartbeat"} {
			tool := listedTool(t, out["list"], name)
			hint := mapAt(tool, "annotations")["idempotentHint"] == true
			props := mapAt(mapAt(tool, "inputSchema"), "properties")
			required := stringsOf(mapAt(tool, "inputSchema")["required"])
			_, takesOpID := props["op_id"]
			keyed := slices.Contains([]string{"start_focus", "end_focus", "log_session", "set_steps", "heartbeat"}, name)
			if !hint {
				t.Errorf("%s: idempotentHint false", name)
			}
			if takesOpID && !slices.Contains(required, "op_id") && !keyed {
				t.Errorf("%s: idempotent with an optional op id and no keys", name)
			}
		}
	}},
	{"every_error_has_code", everyErrorHasCode},
}

// sameAnswer fails t unless step id answered what step first did, and was
// marked replayed when it should be.
func sameAnswer(t *testing.T, out map[string]outcome, first, id string, replayed bool) {
	t.Helper()
	if replayed {
		sameAnswerReplayed(t, out, first, id)
		return
	}
	a, b := result(t, out, first), result(t, out, id)
	if a.IsError || b.IsError {
		t.Fatalf("isError: %s %v, %s %v: %s", first, a.IsError, id, b.IsError, b.raw)
	}
	if a.structured() != b.structured() {
		t.Errorf("%s answered %s, want the first answer %s", id, b.structured(), a.structured())
	}
}

// TestFocus runs examples/focus's scenarios with each client over each
// transport, on SQLite.
func TestFocus(t *testing.T) {
	runMatrix(t, bins.focus, focusPlan(), focusChecks, focusArgs)
}

// focusArgs are examples/focus's flags for a fresh SQLite database.
func focusArgs(t *testing.T) []string { return []string{"-store", "sqlite:" + t.TempDir() + "/f.db"} }
