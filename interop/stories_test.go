package interop_test

import (
	"slices"
	"strings"
	"testing"
)

// The story examples/stories publishes in the scenarios, and its edit.
const (
	storySlug = "interop-story"
	storyBody = "Reset the password, then sign in twice."
	storyEdit = "Reset the password, then sign in twice within a minute."
)

// storiesWrites are the write tools of examples/stories with the op id
// each scenario sends them with, in an order where each makes sense.
var storiesWrites = []step{
	call("publish", "publish_story", map[string]any{"slug": storySlug, "title": "Login loops", "body": storyBody, "op_id": "op-publish"}),
	call("reproduce", "report_reproduction", map[string]any{"slug": storySlug, "handle": "@ana", "note": "on Firefox", "op_id": "op-reproduce"}),
	call("edit", "edit_story", map[string]any{"slug": storySlug, "revision": 1, "body": storyEdit, "op_id": "op-edit"}),
	call("check", "report_check", map[string]any{"slug": storySlug, "handle": "@ben", "result": "pass", "op_id": "op-check"}),
}

// storiesPlan sends every write tool twice on one session (the second a
// replay) and a third time without its op id (the record keys alone make
// it harmless), then refusals (among them the edit resent with a reworded
// body on the revision it moved past, as a model may resend it); on a new
// session, every write again with its
// op id (a retry after a lost answer, as a client that reconnects sends
// it), and get_story.
func storiesPlan() plan {
	var first, second []step
	for _, w := range storiesWrites {
		keyed := map[string]any{}
		for k, v := range w.Arguments {
			if k != "op_id" {
				keyed[k] = v
			}
		}
		first = append(first, w, call(w.ID+"_replay", w.Name, w.Arguments), call(w.ID+"_keyed", w.Name, keyed))
		second = append(second, call(w.ID+"_new_session", w.Name, w.Arguments))
	}
	first = append([]step{list("list")}, first...)
	first = append(first,
		call("missing_key", "report_reproduction", map[string]any{"slug": storySlug}),
		call("sentinel", "report_check", map[string]any{"slug": storySlug, "handle": "@ben", "result": sentinel}),
		call("no_story", "edit_story", map[string]any{"slug": "never-published", "revision": 1, "body": "x"}),
		call("edit_reworded", "edit_story", map[string]any{"slug": storySlug, "revision": 1, "body": storyEdit + " Reworded."}),
	)
	second = append(second, call("read", "get_story", map[string]any{"slug": storySlug}))
	return plan{Sessions: []session{{Steps: first}, {Steps: second}}}
}

var storiesChecks = []check{
	{"list_tools", func(t *testing.T, out map[string]outcome) {
		listsTools(t, out["list"], "publish_story", "report_reproduction", "edit_story", "report_check", "get_story", "get_operation")
	}},
	{"no_boolean_subschemas", func(t *testing.T, out map[string]outcome) {
		noBooleanSubschemas(t, out["list"])
	}},
	{"keys_required_where_idempotent", func(t *testing.T, out map[string]outcome) {
		for name, keys := range map[string][]string{
			"publish_story": {"slug"}, "report_reproduction": {"slug", "handle"},
			"edit_story": {"slug"}, "report_check": {"slug", "handle"},
		} {
			tool := listedTool(t, out["list"], name)
			if mapAt(tool, "annotations")["idempotentHint"] != true {
				t.Errorf("%s: no idempotentHint", name)
			}
			required := stringsOf(mapAt(tool, "inputSchema")["required"])
			for _, k := range keys {
				if !slices.Contains(required, k) {
					t.Errorf("%s claims idempotentHint but its key %s is not required (required: %v)", name, k, required)
				}
			}
		}
		// revision is edit_story's precondition, not a record key, and
		// required all the same.
		if required := stringsOf(mapAt(listedTool(t, out["list"], "edit_story"), "inputSchema")["required"]); !slices.Contains(required, "revision") {
			t.Errorf("edit_story: revision is not required (required: %v)", required)
		}
		if mapAt(listedTool(t, out["list"], "get_story"), "annotations")["readOnlyHint"] != true {
			t.Errorf("get_story is not marked read-only")
		}
	}},
	{"send_twice", func(t *testing.T, out map[string]outcome) {
		for _, w := range storiesWrites {
			if r := result(t, out, w.ID); r.replayed() {
				t.Errorf("%s: the first call is marked replayed", w.ID)
			}
			sameAnswerReplayed(t, out, w.ID, w.ID+"_replay")
		}
	}},
	{"retry_on_new_session", func(t *testing.T, out map[string]outcome) {
		for _, w := range storiesWrites {
			sameAnswerReplayed(t, out, w.ID, w.ID+"_new_session")
		}
	}},
	{"keyed_repeat_without_op_id", func(t *testing.T, out map[string]outcome) {
		for _, w := range storiesWrites {
			a, b := result(t, out, w.ID), result(t, out, w.ID+"_keyed")
			if b.IsError || a.structured() != b.structured() {
				t.Errorf("%s without op id answered %s, want %s", w.ID, b.raw, a.structured())
			}
		}
	}},
	{"written_once", func(t *testing.T, out map[string]outcome) {
		r := result(t, out, "read")
		var v struct {
			Revision      int   `json:"revision"`
			Reproductions int   `json:"reproductions"`
			Checks        []any `json:"checks"`
			Posts         []struct {
				Kind  string `json:"kind"`
				State string `json:"state"`
			} `json:"posts"`
		}
		if err := remarshal(r.StructuredContent, &v); err != nil || r.IsError {
			t.Fatalf("get_story: %s", r.raw)
		}
		if v.Revision != 2 || v.Reproductions != 1 || len(v.Checks) != 1 || len(v.Posts) != 3 {
			t.Errorf("get_story: revision %d, %d reproductions, %d checks, %d posts; want 2, 1, 1, 3: %s",
				v.Revision, v.Reproductions, len(v.Checks), len(v.Posts), r.structured())
		}
		for _, p := range v.Posts {
			if p.State != "done" {
				t.Errorf("post %s is %s, want done", p.Kind, p.State)
			}
		}
	}},
	{"refusals", func(t *testing.T, out map[string]outcome) {
		refused(t, out, "missing_key", "missing_key")
		if o := out["sentinel"]; strings.Contains(string(o.Result), sentinel) {
			t.Errorf("the answer echoes the argument value: %s", o.Result)
		}
		refused(t, out, "sentinel", "invalid_arguments")
		refused(t, out, "no_story", "not_saved")
		refused(t, out, "edit_reworded", "not_saved")
	}},
	{"every_error_has_code", everyErrorHasCode},
}

// TestStories runs every scenario against examples/stories, on SQLite,
// with each client over each transport.
func TestStories(t *testing.T) {
	runMatrix(t, bins.stories, storiesPlan(), storiesChecks, storiesArgs)
}

// storiesArgs are examples/stories's flags for a fresh SQLite database.
func storiesArgs(t *testing.T) []string {
	return []string{"-store", "sqlite:" + t.TempDir() + "/stories.db"}
}
