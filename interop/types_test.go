package interop_test

import (
	"encoding/json"
	"testing"
)

// The arguments of the types server's tools: any, maps, pointers and nested
// structs, with nulls, floats and empty containers where a converter slips.
var (
	doc = map[string]any{
		"doc_id": "d1",
		"body":   map[string]any{"a": 1, "b": []any{1, "x", nil, 2.5}, "c": map[string]any{"d": true, "e": map[string]any{}}},
		"extra":  []any{1, map[string]any{"k": "v"}, []any{}},
		"labels": map[string]any{"x": "y"},
		"owner":  map[string]any{"name": "Ann", "address": map[string]any{"city": "Oslo", "street": "Storgata 1"}},
		"rank":   3,
	}
	entry = map[string]any{
		"payload": map[string]any{"deep": map[string]any{"list": []any{1, 2.5, "s", nil, map[string]any{"x": map[string]any{}}}}},
		"attrs":   map[string]any{"k": []any{}, "n": nil},
		"author":  map[string]any{"name": "Bo"},
		"weight":  0.5,
		"op_id":   "entry-1",
	}
)

// typesPlan is the scenarios of the types server: a keyed write repeated, an
// op-id write replayed on the same and on a new session, a key reuse, a
// missing key and get_operation.
func typesPlan() plan {
	return plan{Sessions: []session{
		{Steps: []step{
			list("list"),
			call("put_first", "put_doc", doc),
			call("put_again", "put_doc", doc),
			call("put_missing_key", "put_doc", map[string]any{"body": map[string]any{}}),
			call("put_null_key", "put_doc", map[string]any{"doc_id": nil}),
			call("append_first", "append_entry", entry),
			call("append_replay", "append_entry", entry),
			call("append_key_reused", "append_entry", map[string]any{"payload": 1, "op_id": "entry-1"}),
			call("append_scalar", "append_entry", map[string]any{"payload": "just a string", "op_id": "entry-2"}),
			call("status", "get_operation", map[string]any{"tool": "append_entry", "op_id": "entry-1"}),
		}},
		{Steps: []step{
			call("append_replay_new_session", "append_entry", entry),
		}},
	}}
}

var typesChecks = []check{
	{"list_tools", func(t *testing.T, out map[string]outcome) {
		listsTools(t, out["list"], "put_doc", "append_entry", "get_operation")
	}},
	{"no_boolean_subschemas", func(t *testing.T, out map[string]outcome) {
		noBooleanSubschemas(t, out["list"])
	}},
	{"keyed_repeat", func(t *testing.T, out map[string]outcome) {
		a, b := result(t, out, "put_first"), result(t, out, "put_again")
		if a.IsError || b.IsError {
			t.Fatalf("put_doc: %s / %s", a.raw, b.raw)
		}
		sameJSON(t, "put_doc answer", a.StructuredContent, doc)
		sameJSON(t, "put_doc repeat", b.StructuredContent, doc)
	}},
	{"missing_key", func(t *testing.T, out map[string]outcome) {
		refused(t, out, "put_missing_key", "missing_key")
		refused(t, out, "put_null_key", "missing_key")
	}},
	{"op_id_round_trip", func(t *testing.T, out map[string]outcome) {
		r := result(t, out, "append_first")
		if r.IsError || r.replayed() {
			t.Fatalf("append_entry: %s", r.raw)
		}
		var got struct {
			Seq   int64          `json:"seq"`
			Entry map[string]any `json:"entry"`
		}
		if err := remarshal(r.StructuredContent, &got); err != nil || got.Seq != 1 {
			t.Fatalf("append_entry answered %s, want seq 1", r.structured())
		}
		want := map[string]any{}
		for k, v := range entry {
			if k != "op_id" {
				want[k] = v
			}
		}
		sameJSON(t, "entry", got.Entry, want)
		if s := result(t, out, "append_scalar"); s.IsError || totalSeq(s) != 2 {
			t.Errorf("append_entry with a string payload: %s, want seq 2", s.raw)
		}
	}},
	{"replay_same_session", func(t *testing.T, out map[string]outcome) {
		sameAnswerReplayed(t, out, "append_first", "append_replay")
	}},
	{"replay_new_session", func(t *testing.T, out map[string]outcome) {
		sameAnswerReplayed(t, out, "append_first", "append_replay_new_session")
	}},
	{"key_reused", func(t *testing.T, out map[string]outcome) {
		refused(t, out, "append_key_reused", "key_reused")
	}},
	{"get_operation", func(t *testing.T, out map[string]outcome) {
		r := result(t, out, "status")
		st, _ := r.StructuredContent.(map[string]any)
		if r.IsError || st["status"] != "committed" {
			t.Fatalf("get_operation: %s, want status committed", r.raw)
		}
		sameJSON(t, "get_operation output", st["output"], result(t, out, "append_first").StructuredContent)
	}},
	{"every_error_has_code", everyErrorHasCode},
}

// TestTypes runs the types server's scenarios with each client over each
// transport, on SQLite (so a new stdio process sees the first one's
// records).
func TestTypes(t *testing.T) {
	// Served over HTTP as the examples serve it: stateless (-stateless is
	// ignored over stdio).
	runMatrix(t, bins.types, typesPlan(), typesChecks, func(t *testing.T) []string {
		return []string{"-db", t.TempDir() + "/types.db", "-stateless"}
	})
}

func totalSeq(r callResult) int64 {
	var got struct {
		Seq int64 `json:"seq"`
	}
	_ = remarshal(r.StructuredContent, &got)
	return got.Seq
}

// sameJSON fails t unless got and want encode to the same JSON (maps encode
// with sorted keys).
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	var g, w any
	if err := remarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := remarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s: got %s, want %s", what, gb, wb)
	}
}
