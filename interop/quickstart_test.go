package interop_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sentinel is an argument value no answer may echo.
const sentinel = "SENTINEL-7f3a"

// The amounts the concurrency scenario adds: before the 20 concurrent calls,
// in them (once, if the op id holds), and after.
const (
	amountBefore     = 100
	amountConcurrent = 300
	amountAfter      = 7
	concurrentCalls  = 20
)

var firstExpense = map[string]any{"amount_cents": 1250, "note": "lunch", "op_id": "op-first"}

// quickstartPlan is every scenario against examples/quickstart: one session
// that runs them all, and a second, new session that repeats the first call.
func quickstartPlan() plan {
	expense := func(amount any, opID any) map[string]any {
		m := map[string]any{"amount_cents": amount, "note": "interop"}
		if opID != nil {
			m["op_id"] = opID
		}
		return m
	}
	nullOpID := expense(100, nil)
	nullOpID["op_id"] = nil
	conc := call("concurrent", "add_expense", expense(amountConcurrent, "op-concurrent"))
	conc.Parallel = concurrentCalls
	return plan{Sessions: []session{
		{Steps: []step{
			list("list"),
			call("first", "add_expense", firstExpense),
			call("replay_same_session", "add_expense", firstExpense),
			call("key_reused", "add_expense", map[string]any{"amount_cents": 999, "note": "lunch", "op_id": "op-first"}),
			call("missing_key_absent", "set_budget", map[string]any{"amount_cents": 40000}),
			call("missing_key_empty", "set_budget", map[string]any{"month": "", "amount_cents": 40000}),
			call("op_id_null", "add_expense", nullOpID),
			call("op_id_number", "add_expense", expense(100, 42)),
			call("op_id_empty", "add_expense", expense(100, "")),
			call("sentinel", "add_expense", expense(sentinel, "op-sentinel")),
			call("handler_error", "add_expense", expense(0, "op-zero")),
			call("status_committed", "get_operation", map[string]any{"tool": "add_expense", "op_id": "op-first"}),
			call("status_unknown", "get_operation", map[string]any{"tool": "add_expense", "op_id": "op-never-sent"}),
			// The op id in _meta, on the tool that requires one and on
			// get_operation; then as the argument, naming the same op.
			callMeta("meta_first", "add_expense", map[string]any{"amount_cents": 200, "note": "meta"}, "op-meta"),
			callMeta("meta_replay", "add_expense", map[string]any{"amount_cents": 200, "note": "meta"}, "op-meta"),
			call("meta_replay_as_argument", "add_expense", map[string]any{"amount_cents": 200, "note": "meta", "op_id": "op-meta"}),
			callMeta("status_meta", "get_operation", map[string]any{"tool": "add_expense"}, "op-meta"),
			call("status_no_op_id", "get_operation", map[string]any{"tool": "add_expense"}),
			call("before_concurrent", "add_expense", expense(amountBefore, "op-before")),
			conc,
			call("after_concurrent", "add_expense", expense(amountAfter, "op-after")),
		}},
		{Steps: []step{
			call("replay_new_session", "add_expense", firstExpense),
		}},
	}}
}

// A check is one scenario's assertions on a client's outcomes.
type check struct {
	name string
	fn   func(t *testing.T, out map[string]outcome)
}

var quickstartChecks = []check{
	{"list_tools", func(t *testing.T, out map[string]outcome) {
		listsTools(t, out["list"], "add_expense", "set_budget", "get_operation")
	}},
	{"no_boolean_subschemas", func(t *testing.T, out map[string]outcome) {
		noBooleanSubschemas(t, out["list"])
	}},
	{"honest_idempotent_hint", func(t *testing.T, out map[string]outcome) {
		tool := listedTool(t, out["list"], "add_expense")
		required := stringsOf(mapAt(tool, "inputSchema")["required"])
		hint := mapAt(tool, "annotations")["idempotentHint"] == true
		if hint && !slices.Contains(required, "op_id") {
			t.Errorf("add_expense claims idempotentHint but op_id is not required (required: %v): a call without op_id is not idempotent", required)
		}
	}},
	{"op_id_typed_string", func(t *testing.T, out map[string]outcome) {
		tool := listedTool(t, out["list"], "add_expense")
		p := mapAt(mapAt(mapAt(tool, "inputSchema"), "properties"), "op_id")
		if p == nil {
			t.Fatalf("add_expense has no op_id property")
		}
		if p["type"] != "string" {
			t.Errorf("op_id schema type %v, want \"string\"", p["type"])
		}
	}},
	{"first_call", func(t *testing.T, out map[string]outcome) {
		r := result(t, out, "first")
		if r.IsError || r.replayed() {
			t.Fatalf("first call: isError %v, replayed %v: %s", r.IsError, r.replayed(), r.raw)
		}
		var added struct {
			ID         string `json:"id"`
			TotalCents int64  `json:"total_cents"`
		}
		if err := remarshal(r.StructuredContent, &added); err != nil || added.ID == "" || added.TotalCents != 1250 {
			t.Fatalf("first call answered %s, want {id, total_cents: 1250}", r.structured())
		}
	}},
	{"replay_same_session", func(t *testing.T, out map[string]outcome) {
		sameAnswerReplayed(t, out, "first", "replay_same_session")
	}},
	{"replay_new_session", func(t *testing.T, out map[string]outcome) {
		sameAnswerReplayed(t, out, "first", "replay_new_session")
	}},
	{"key_reused", func(t *testing.T, out map[string]outcome) {
		refused(t, out, "key_reused", "key_reused")
	}},
	{"missing_key", func(t *testing.T, out map[string]outcome) {
		refused(t, out, "missing_key_absent", "missing_key")
		refused(t, out, "missing_key_empty", "missing_key")
	}},
	{"invalid_op_id", func(t *testing.T, out map[string]outcome) {
		for _, id := range []string{"op_id_null", "op_id_number", "op_id_empty"} {
			refused(t, out, id, "invalid_op_id")
		}
	}},
	{"invalid_arguments_without_value", func(t *testing.T, out map[string]outcome) {
		if o := out["sentinel"]; strings.Contains(string(o.Result), sentinel) {
			t.Errorf("the answer echoes the argument value: %s", o.Result)
		}
		refused(t, out, "sentinel", "invalid_arguments")
	}},
	{"out_of_range_refused_by_schema", func(t *testing.T, out map[string]outcome) {
		r := refused(t, out, "handler_error", "invalid_arguments")
		if !strings.Contains(r.text(), `"amount_cents"`) {
			t.Errorf("the refusal does not name the argument: text %q", r.text())
		}
	}},
	{"get_operation", func(t *testing.T, out map[string]outcome) {
		for id, want := range map[string]string{"status_committed": "committed", "status_unknown": "not_committed"} {
			r := result(t, out, id)
			st, _ := r.StructuredContent.(map[string]any)
			if r.IsError || st["status"] != want {
				t.Errorf("%s: got %s (isError %v), want status %q", id, r.raw, r.IsError, want)
			}
		}
	}},
	{"op_id_in_meta", func(t *testing.T, out map[string]outcome) {
		r := result(t, out, "meta_first")
		if r.IsError || r.replayed() {
			t.Fatalf("first call with the op id in _meta: %s", r.raw)
		}
		sameAnswerReplayed(t, out, "meta_first", "meta_replay")
		sameAnswerReplayed(t, out, "meta_first", "meta_replay_as_argument")
		st := result(t, out, "status_meta")
		if s, _ := st.StructuredContent.(map[string]any); st.IsError || s["status"] != "committed" {
			t.Errorf("get_operation with the op id in _meta: %s, want committed", st.raw)
		}
		refused(t, out, "status_no_op_id", "invalid_op_id")
	}},
	{"concurrent_same_op_id", func(t *testing.T, out map[string]outcome) {
		before := totalOf(t, result(t, out, "before_concurrent"))
		o := out["concurrent"]
		if len(o.Results) != concurrentCalls {
			t.Fatalf("%d concurrent answers (error %v), want %d", len(o.Results), o.Error, concurrentCalls)
		}
		first := resultOf(t, "concurrent[0]", o.Results[0])
		for i, oi := range o.Results {
			r := resultOf(t, "concurrent", oi)
			if r.IsError || r.structured() != first.structured() {
				t.Fatalf("concurrent answer %d: %s, want %s", i, r.raw, first.structured())
			}
		}
		if got := totalOf(t, first); got != before+amountConcurrent {
			t.Errorf("concurrent total %d, want %d", got, before+amountConcurrent)
		}
		if got, want := totalOf(t, result(t, out, "after_concurrent")), before+amountConcurrent+amountAfter; got != want {
			t.Errorf("total after the %d concurrent calls %d, want %d (they ran %.1f times)",
				concurrentCalls, got, want, float64(got-before-amountAfter)/amountConcurrent)
		}
	}},
	{"every_error_has_code", everyErrorHasCode},
}

// TestQuickstart runs every scenario against the quickstart on each MCP
// library with each client over each transport.
func TestQuickstart(t *testing.T) {
	for _, qs := range quickstartServers() {
		t.Run(qs.name, func(t *testing.T) {
			runMatrix(t, qs.bin, quickstartPlan(), quickstartChecks, quickstartArgs)
		})
	}
}

// A quickstartServer is the quickstart on one MCP library.
type quickstartServer struct {
	name string // the library
	bin  string
}

// quickstartServers are examples/quickstart (go-sdk) and
// examples/quickstart-mcpgo (mcp-go): the quickstart's checks, and the
// agent-facing ones, run against both.
func quickstartServers() []quickstartServer {
	return []quickstartServer{{"go-sdk", bins.quickstart}, {"mcp-go", bins.quickstartMCPGo}}
}

// quickstartArgs are the quickstart's flags for a fresh database (both
// quickstarts take -db).
func quickstartArgs(t *testing.T) []string { return []string{"-db", t.TempDir() + "/q.db"} }

// matrixClients returns the clients for transport: the TypeScript SDK
// clients v1 and v2, and mcp-go's default client. The quickstart serves
// streamable HTTP stateless, where mcp-go's default client (server/discover
// first) works; over HTTP the v2 client also runs with its auto version
// negotiation, which opens the same way. Against a stateful handler mcp-go
// needs a pinned protocol: TestMCPGoDefaultClientOverStatefulHTTP.
func matrixClients(transport string) []client {
	cs := []client{nodeClient{sdk: "v1"}, nodeClient{sdk: "v2"}, mcpGoClient{label: "mcpgo"}}
	if transport == "http" {
		cs = append(cs, nodeClient{sdk: "v2", negotiation: "auto"})
	}
	return cs
}

// runMatrix runs p against a fresh server of bin for every client and
// transport, in parallel, and then checks on each client's outcomes.
func runMatrix(t *testing.T, bin string, p plan, checks []check, args func(t *testing.T) []string) {
	for _, transport := range []string{"stdio", "http"} {
		for _, c := range matrixClients(transport) {
			t.Run(c.name()+"/"+transport, func(t *testing.T) {
				t.Parallel()
				if _, ok := c.(nodeClient); ok {
					needNode(t)
				}
				tg := newTarget(t, transport, bin, args(t)...)
				out, err := c.run(testContext(t), tg, p)
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range checks {
					t.Run(ch.name, func(t *testing.T) { ch.fn(t, out) })
				}
			})
		}
	}
}

// listsTools fails t unless o lists every tool in names.
func listsTools(t *testing.T, o outcome, names ...string) {
	t.Helper()
	if o.Error != nil {
		t.Fatalf("listing tools: the client raised %q", o.Error.Message)
	}
	var listed []string
	for _, tool := range o.Tools {
		n, _ := tool["name"].(string)
		listed = append(listed, n)
	}
	for _, n := range names {
		if !slices.Contains(listed, n) {
			t.Errorf("tool %s not listed (listed: %v)", n, listed)
		}
	}
}

// listedTool returns the listed tool called name.
func listedTool(t *testing.T, o outcome, name string) map[string]any {
	t.Helper()
	if o.Error != nil {
		t.Fatalf("listing tools: the client raised %q", o.Error.Message)
	}
	for _, tool := range o.Tools {
		if tool["name"] == name {
			return tool
		}
	}
	t.Fatalf("tool %s not listed", name)
	return nil
}

// noBooleanSubschemas fails t for every boolean subschema in a listed
// tool's input or output schema: clients such as the TypeScript SDK v1
// refuse the whole tools/list answer for one.
func noBooleanSubschemas(t *testing.T, o outcome) {
	t.Helper()
	if o.Error != nil {
		t.Fatalf("listing tools: the client raised %q", o.Error.Message)
	}
	if len(o.Tools) == 0 {
		t.Fatal("no tools listed")
	}
	for _, tool := range o.Tools {
		for _, key := range []string{"inputSchema", "outputSchema"} {
			for _, path := range booleanSubschemas(tool[key], key) {
				t.Errorf("tool %s: boolean subschema at %s", tool["name"], path)
			}
		}
	}
}

// booleanSubschemas returns the paths of the boolean subschemas of schema.
func booleanSubschemas(schema any, path string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	var found []string
	visit := func(v any, p string) {
		if _, isBool := v.(bool); isBool {
			found = append(found, p)
			return
		}
		found = append(found, booleanSubschemas(v, p)...)
	}
	for _, k := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"} {
		if m, ok := s[k].(map[string]any); ok {
			for name, sub := range m {
				visit(sub, path+"."+k+"."+name)
			}
		}
	}
	for _, k := range []string{"items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties"} {
		if sub, ok := s[k]; ok {
			visit(sub, path+"."+k)
		}
	}
	if sub, ok := s["additionalProperties"]; ok {
		// additionalProperties: false is the usual way to close an object;
		// only a schema object is walked.
		if _, isBool := sub.(bool); !isBool {
			visit(sub, path+".additionalProperties")
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if l, ok := s[k].([]any); ok {
			for i, sub := range l {
				visit(sub, path+"."+k+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	return found
}

// sameAnswerReplayed fails t unless step id answered what step first did,
// marked as replayed.
func sameAnswerReplayed(t *testing.T, out map[string]outcome, first, id string) {
	t.Helper()
	a, b := result(t, out, first), result(t, out, id)
	if a.IsError || b.IsError {
		t.Fatalf("isError: %s %v, %s %v: %s", first, a.IsError, id, b.IsError, b.raw)
	}
	if a.structured() != b.structured() {
		t.Errorf("%s answered %s, want the first answer %s", id, b.structured(), a.structured())
	}
	if !b.replayed() {
		t.Errorf("%s: _meta %v, want io.idemkit/replayed true", id, b.Meta)
	}
}

// refused fails t unless step id is a tool error with code.
func refused(t *testing.T, out map[string]outcome, id, code string) callResult {
	t.Helper()
	r := result(t, out, id)
	if !r.IsError || r.code() != code {
		t.Errorf("%s: isError %v, code %q, want code %q: %s", id, r.IsError, r.code(), code, r.raw)
	}
	return r
}

// everyErrorHasCode fails t for every tool error without a code in
// _meta["io.idemkit/error"], and for every call the client raised on.
func everyErrorHasCode(t *testing.T, out map[string]outcome) {
	t.Helper()
	var visit func(id string, o outcome)
	visit = func(id string, o outcome) {
		for _, oi := range o.Results {
			visit(id, oi)
		}
		if o.Error != nil && o.Tools == nil && len(o.Results) == 0 && !strings.HasPrefix(id, "list") {
			t.Errorf("%s: the client raised %q instead of returning a tool result", id, o.Error.Message)
		}
		if len(o.Result) == 0 {
			return
		}
		var r callResult
		if err := json.Unmarshal(o.Result, &r); err != nil {
			t.Errorf("%s: %v", id, err)
			return
		}
		if r.IsError && r.code() == "" {
			t.Errorf("%s: tool error without _meta[\"io.idemkit/error\"]: %s", id, o.Result)
		}
	}
	for id, o := range out {
		visit(id, o)
	}
}

func totalOf(t *testing.T, r callResult) int64 {
	t.Helper()
	var added struct {
		TotalCents *int64 `json:"total_cents"`
	}
	if err := remarshal(r.StructuredContent, &added); err != nil || added.TotalCents == nil {
		t.Fatalf("no total_cents in %s", r.raw)
	}
	return *added.TotalCents
}

func mapAt(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

func stringsOf(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
