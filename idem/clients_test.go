package idem_test

// What clients other people wrote need from a server: schemas they accept,
// hints that are true for every call, one error shape, refusals that quote
// no argument.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/store/memory"
)

// loose holds the kinds of field that make jsonschema-go write boolean
// subschemas: any, maps of any, pointers and nested structs.
type loose struct {
	ID    string         `json:"id"`
	Value any            `json:"value,omitempty"`
	Attrs map[string]any `json:"attrs,omitempty"`
	Ptr   *int           `json:"ptr,omitempty"`
	Inner *struct {
		Deep any   `json:"deep"`
		List []any `json:"list,omitempty"`
	} `json:"inner,omitempty"`
}

// booleanSchemas lists the places in the JSON schema v where a schema is a
// boolean, other than additionalProperties and its kin.
func booleanSchemas(v any, at string) []string {
	var found []string
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for k, sub := range m {
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if props, ok := sub.(map[string]any); ok {
				for name, p := range props {
					if _, isBool := p.(bool); isBool {
						found = append(found, at+"/"+k+"/"+name)
					}
					found = append(found, booleanSchemas(p, at+"/"+k+"/"+name)...)
				}
			}
		case "items", "not", "contains", "if", "then", "else", "propertyNames":
			if _, isBool := sub.(bool); isBool {
				found = append(found, at+"/"+k)
			}
			found = append(found, booleanSchemas(sub, at+"/"+k)...)
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if list, ok := sub.([]any); ok {
				for _, e := range list {
					if _, isBool := e.(bool); isBool {
						found = append(found, at+"/"+k)
					}
					found = append(found, booleanSchemas(e, at+"/"+k)...)
				}
			}
		case "additionalProperties":
			if b, isBool := sub.(bool); isBool && b {
				found = append(found, at+"/"+k) // true is {}; false is allowed
			}
			found = append(found, booleanSchemas(sub, at+"/"+k)...)
		}
	}
	return found
}

func schemaJSON(t *testing.T, s any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(mustJSON(s)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Finding 1: no published schema holds a boolean subschema (the v1
// TypeScript SDK rejects the whole tools/list for one), get_operation's and
// an author's own types with any, maps, pointers and nested structs alike.
func TestPublishedSchemasHaveNoBooleanSubschemas(t *testing.T) {
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	handler := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in loose) (*mcp.CallToolResult, loose, error) {
		return nil, in, tx.Put(ctx, idem.Key{Collection: "docs", ID: in.ID}, in)
	}
	idem.AddTool(srv, &mcp.Tool{Name: "put"}, s, handler, idem.RecordKeys("id"))
	idem.AddTool(srv, &mcp.Tool{Name: "put_map"}, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, map[string]any, error) {
		return nil, in, nil
	}, idem.OpID())
	idem.RegisterStatusTool(srv, s)
	tools := listTools(t, srv)
	if len(tools) != 3 {
		t.Fatalf("listed %d tools, want 3", len(tools))
	}
	for name, tool := range tools {
		for _, which := range []struct {
			kind   string
			schema any
		}{{"input", tool.InputSchema}, {"output", tool.OutputSchema}} {
			if which.schema == nil {
				continue
			}
			if found := booleanSchemas(schemaJSON(t, which.schema), ""); len(found) > 0 {
				t.Errorf("%s %s schema has boolean subschemas at %v: %s", name, which.kind, found, mustJSON(which.schema))
			}
		}
	}
	// The rewritten schema still validates what it did: {} accepts anything.
	cs := connectInMemory(t, srv)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "put", Arguments: map[string]any{
		"id": "d1", "value": []any{1, "x"}, "attrs": map[string]any{"k": true}, "inner": map[string]any{"deep": nil}}})
	if err != nil || res.IsError {
		t.Fatalf("call with loose values: %v %s", err, mustJSON(res))
	}
}

// A false subschema where strict clients reject it is refused when the tool
// is registered, not sent to every client.
func TestFalseSubschemaRefusedAtRegistration(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"never":false}}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "false schema") {
			t.Errorf("a false property schema was not refused: %v", r)
		}
	}()
	idem.AddTool(srv, &mcp.Tool{Name: "x", InputSchema: raw}, memory.New(nil), noop[map[string]any])
}

// Finding 2: the hint is a promise about every call. An optional op id
// without keys does not make a tool idempotent (and claiming it is refused);
// a required one does, and so do keys, with or without an optional op id,
// and so does the author's claim for a handler whose own logic makes a
// repeat harmless.
func TestIdempotentHintHoldsForEveryCall(t *testing.T) {
	type note struct {
		Text string `json:"text"`
	}
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	cases := []struct {
		name       string
		opts       []idem.Option
		claimed    bool // the author's annotations say idempotent
		idempotent bool
		required   []string
	}{
		{"optional_op_id", []idem.Option{idem.OpID()}, false, false, nil},
		{"required_op_id", []idem.Option{idem.RequireOpID()}, false, true, []string{"op_id"}},
		{"keys", []idem.Option{idem.RecordKeys("text")}, false, true, []string{"text"}},
		{"keys_and_optional_op_id", []idem.Option{idem.RecordKeys("text"), idem.OpID()}, false, true, []string{"text"}},
		{"keys_and_optional_op_id_claimed", []idem.Option{idem.RecordKeys("text"), idem.OpID()}, true, true, []string{"text"}},
		{"nothing", nil, false, false, nil},
		{"nothing_claimed", nil, true, true, nil},
	}
	for _, c := range cases {
		idem.AddTool(srv, &mcp.Tool{Name: c.name, Annotations: &mcp.ToolAnnotations{IdempotentHint: c.claimed}}, s, noop[note], c.opts...)
	}
	// Claiming idempotent for a tool whose op id is optional, without keys,
	// is refused at registration.
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "op id is optional") {
				t.Errorf("optional op id claimed idempotent: recovered %v, want a refusal", r)
			}
		}()
		idem.AddTool(srv, &mcp.Tool{Name: "optional_op_id_claimed", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, s, noop[note], idem.OpID())
	}()
	tools := listTools(t, srv)
	for _, c := range cases {
		tool := tools[c.name]
		if tool.Annotations.IdempotentHint != c.idempotent {
			t.Errorf("%s: idempotentHint %v, want %v", c.name, tool.Annotations.IdempotentHint, c.idempotent)
		}
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal([]byte(mustJSON(tool.InputSchema)), &schema); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.required {
			if !slices.Contains(schema.Required, r) {
				t.Errorf("%s: required %v lacks %q", c.name, schema.Required, r)
			}
		}
		if !slices.Contains(c.required, "op_id") && slices.Contains(schema.Required, "op_id") {
			t.Errorf("%s: op_id required though optional", c.name)
		}
		if p, ok := schema.Properties["op_id"]; ok && !strings.Contains(string(p), `"type":"string"`) {
			t.Errorf("%s: op_id property has no string type: %s", c.name, p)
		}
	}
	if d := tools["required_op_id"].Description; !strings.Contains(d, "(required)") || !strings.Contains(d, "retry") {
		t.Errorf("a required op id's description does not say who mints it: %s", d)
	}
	// The promise holds: two identical calls without an op id ran twice on
	// the optional tool, which says false; the required tool refuses them.
	cs := connectInMemory(t, srv)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "required_op_id", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.Meta[idem.MetaError] != string(idem.CodeInvalidOpID) {
		t.Errorf("a call without the required op id: %v %s", err, mustJSON(res))
	}
}

// Finding 3: an op id that is there but not a string (null included) is
// refused, never taken for no op id.
func TestNonStringOpIDRefused(t *testing.T) {
	runs := 0
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		runs++
		return nil, nil, nil
	}, idem.OpID())
	cs := connectInMemory(t, srv)
	for _, c := range []struct {
		name string
		args map[string]any
		meta mcp.Meta
	}{
		{"null", map[string]any{"text": "x", "op_id": nil}, nil},
		{"number", map[string]any{"text": "x", "op_id": 42}, nil},
		{"object", map[string]any{"text": "x", "op_id": map[string]any{}}, nil},
		{"empty", map[string]any{"text": "x", "op_id": ""}, nil},
		{"meta_null", map[string]any{"text": "x"}, mcp.Meta{idem.MetaOpID: nil}},
		{"meta_number", map[string]any{"text": "x"}, mcp.Meta{idem.MetaOpID: 7}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add", Arguments: c.args, Meta: c.meta})
		if err != nil || !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidOpID) {
			t.Errorf("%s: %v %s, want invalid_op_id", c.name, err, mustJSON(res))
		}
	}
	if runs != 0 {
		t.Errorf("the handler ran %d times for refused op ids", runs)
	}
}

// Finding 4: one error shape. A schema refusal has a code and names the
// argument, never its value; a handler's error has a code and keeps the
// author's message; an IsError result the handler builds gets a code too.
func TestEveryErrorHasACodeAndNoValue(t *testing.T) {
	type expense struct {
		AmountCents int64  `json:"amount_cents"`
		Month       string `json:"month"`
		Note        string `json:"note,omitempty" jsonschema:"what it was for"`
	}
	const sentinel = "SENTINEL-7f3a-value"
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	runs := 0
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in expense) (*mcp.CallToolResult, any, error) {
		runs++
		switch in.Note {
		case "fail":
			return nil, nil, errors.New("amount_cents must be above zero.")
		case "result":
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the month is closed"}}}, nil, nil
		case "coded":
			return nil, nil, &idem.Error{Code: target.CodeEventBeforeStart, Message: "too early"}
		}
		return nil, nil, tx.Put(ctx, idem.Key{Collection: "expenses", ID: in.Month}, in)
	}, idem.RecordKeys("month"), idem.OpID())
	cs := connectInMemory(t, srv)
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || res.Meta[idem.MetaError] == nil {
			t.Errorf("error without a code: %s", mustJSON(res))
		}
		return res
	}
	for _, c := range []struct {
		name string
		args map[string]any
		code idem.Code
		says string
	}{
		{"wrong_type", map[string]any{"month": "2026-11", "amount_cents": sentinel}, idem.CodeInvalidArguments, `argument "amount_cents" does not match its schema: want an integer`},
		{"wrong_type_nested", map[string]any{"month": "2026-11", "amount_cents": 1, "note": []any{sentinel}}, idem.CodeInvalidArguments, `argument "note"`},
		{"unknown_property", map[string]any{"month": "2026-11", "amount_cents": 1, sentinel: 1}, idem.CodeInvalidArguments, "does not accept"},
		{"missing_required", map[string]any{"month": "2026-11"}, idem.CodeInvalidArguments, `argument "amount_cents" is required`},
		{"missing_key", map[string]any{"amount_cents": 1}, idem.CodeMissingKey, `"month"`},
		{"null_key", map[string]any{"month": nil, "amount_cents": 1}, idem.CodeMissingKey, `"month"`},
		{"overflow", map[string]any{"month": "2026-11", "amount_cents": 1e300}, idem.CodeInvalidArguments, `"amount_cents"`},
	} {
		res := call(c.args)
		text := mustJSON(res)
		if res.Meta[idem.MetaError] != string(c.code) || !strings.Contains(textOf(res), c.says) {
			t.Errorf("%s: %s, want code %s saying %q", c.name, text, c.code, c.says)
		}
		if strings.Contains(text, "SENTINEL") || strings.Contains(text, "1e+300") {
			t.Errorf("%s: the refusal quotes the caller's value: %s", c.name, text)
		}
	}
	if runs != 0 {
		t.Fatalf("the handler ran %d times for refused arguments", runs)
	}
	res := call(map[string]any{"month": "2026-11", "amount_cents": 1, "note": "fail"})
	if res.Meta[idem.MetaError] != string(idem.CodeNotSaved) || !strings.Contains(textOf(res), "amount_cents must be above zero. Nothing was saved.") {
		t.Errorf("handler error: %s, want not_saved with the handler's message", mustJSON(res))
	}
	res = call(map[string]any{"month": "2026-11", "amount_cents": 1, "note": "result"})
	if res.Meta[idem.MetaError] != string(idem.CodeNotSaved) || !strings.Contains(textOf(res), "the month is closed") {
		t.Errorf("handler's error result: %s, want not_saved with its text", mustJSON(res))
	}
	res = call(map[string]any{"month": "2026-11", "amount_cents": 1, "note": "coded"})
	if res.Meta[idem.MetaError] != string(target.CodeEventBeforeStart) {
		t.Errorf("handler's *idem.Error: %s, want its own code", mustJSON(res))
	}
}

// An author's schema given as a *jsonschema.Schema is not changed by AddTool.
func TestAuthorSchemaLeftAlone(t *testing.T) {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"id": {Type: "string"}, "any": {}}}
	before := mustJSON(s)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "x", InputSchema: s}, memory.New(nil), noop[map[string]any], idem.RecordKeys("id"), idem.OpID())
	if after := mustJSON(s); after != before {
		t.Errorf("AddTool changed the caller's schema:\n%s\n%s", before, after)
	}
}

// textOf joins the text blocks of res.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustJSON returns v as JSON, or "" if it cannot be encoded.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The input schema's defaults reach the handler, as the SDK applies them.
func TestSchemaDefaultsApplied(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"size":{"type":"integer","default":7}},"required":["id"]}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	var got map[string]any
	idem.AddTool(srv, &mcp.Tool{Name: "x", InputSchema: raw}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		got = in
		return nil, nil, nil
	}, idem.RecordKeys("id"))
	cs := connectInMemory(t, srv)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "x", Arguments: map[string]any{"id": "a"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, mustJSON(res))
	}
	if got["size"] != float64(7) {
		t.Errorf("handler got %v, want the default size 7", got)
	}
}

// An op id sent only in _meta["io.idemkit/op_id"] is an op id wherever the
// op_id argument is one: on a tool that requires it (not refused as a
// missing argument), on its replay, and in get_operation, whose schema
// requires only the tool's name.
func TestOpIDInMetaOnEveryTool(t *testing.T) {
	runs := 0
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, map[string]int, error) {
		runs++
		return nil, map[string]int{"run": runs}, nil
	}, idem.RequireOpID())
	idem.RegisterStatusTool(srv, s)
	cs := connectInMemory(t, srv)
	ctx := context.Background()
	call := func(name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	meta := mcp.Meta{idem.MetaOpID: "app-7"}
	for i, want := range []bool{false, true} {
		res := call("add", map[string]any{"text": "x"}, meta)
		if res.IsError || res.Meta[idem.MetaReplayed] == true != want || textOf(res) != `{"run":1}` {
			t.Errorf("call %d with the op id in _meta: %s, want run 1, replayed %v", i+1, mustJSON(res), want)
		}
	}
	// The argument and _meta name one op: a replay either way.
	if res := call("add", map[string]any{"text": "x", "op_id": "app-7"}, nil); res.Meta[idem.MetaReplayed] != true {
		t.Errorf("the same op id as an argument: %s, want a replay", mustJSON(res))
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}

	for _, c := range []struct {
		name   string
		args   map[string]any
		meta   mcp.Meta
		status string
		code   idem.Code
	}{
		{"meta", map[string]any{"tool": "add"}, mcp.Meta{idem.MetaOpID: "app-7"}, "committed", ""},
		{"argument", map[string]any{"tool": "add", "op_id": "app-7"}, nil, "committed", ""},
		{"both_same", map[string]any{"tool": "add", "op_id": "app-7"}, mcp.Meta{idem.MetaOpID: "app-7"}, "committed", ""},
		{"meta_unknown", map[string]any{"tool": "add"}, mcp.Meta{idem.MetaOpID: "app-8"}, "not_committed", ""},
		{"none", map[string]any{"tool": "add"}, nil, "", idem.CodeInvalidOpID},
		{"meta_empty", map[string]any{"tool": "add"}, mcp.Meta{idem.MetaOpID: ""}, "", idem.CodeInvalidOpID},
		{"meta_number", map[string]any{"tool": "add"}, mcp.Meta{idem.MetaOpID: 7}, "", idem.CodeInvalidOpID},
		{"both_differ", map[string]any{"tool": "add", "op_id": "app-7"}, mcp.Meta{idem.MetaOpID: "app-9"}, "", idem.CodeInvalidOpID},
	} {
		res := call("get_operation", c.args, c.meta)
		if c.code != "" {
			if !res.IsError || res.Meta[idem.MetaError] != string(c.code) {
				t.Errorf("get_operation %s: %s, want %s", c.name, mustJSON(res), c.code)
			}
			continue
		}
		var st struct{ Status string }
		if res.IsError || json.Unmarshal([]byte(textOf(res)), &st) != nil || st.Status != c.status {
			t.Errorf("get_operation %s: %s, want %s", c.name, mustJSON(res), c.status)
		}
	}
	// A lookup without an op id is told what a lookup needs, not to mint one.
	if res := call("get_operation", map[string]any{"tool": "add"}, nil); strings.Contains(textOf(res), "mint") || !strings.Contains(textOf(res), "sent with") {
		t.Errorf("get_operation without an op id says: %s", textOf(res))
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(mustJSON(listTools(t, srv)["get_operation"].InputSchema)), &schema); err != nil || !slices.Equal(schema.Required, []string{"tool"}) {
		t.Errorf("get_operation requires %v, want [tool] (the op id may come in _meta)", schema.Required)
	}
}

// JSON Schema counts 1.0 as an integer: so does a Go integer argument.
// A number with a fraction is still refused, naming the argument.
func TestWholeNumbersAreIntegers(t *testing.T) {
	type in struct {
		Steps int64   `json:"steps"`
		List  []int   `json:"list,omitempty"`
		Rate  float64 `json:"rate,omitempty"`
	}
	var got []in
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, v in) (*mcp.CallToolResult, any, error) {
		got = append(got, v)
		return nil, nil, nil
	})
	cs := connectInMemory(t, srv)
	for _, c := range []struct {
		args string
		want in
		code idem.Code
	}{
		{`{"steps":1.0}`, in{Steps: 1}, ""},
		{`{"steps":1e2,"list":[2.0,3],"rate":0.5}`, in{Steps: 100, List: []int{2, 3}, Rate: 0.5}, ""},
		{`{"steps":-0.0}`, in{}, ""},
		{`{"steps":1.5}`, in{}, idem.CodeInvalidArguments},
		{`{"steps":1,"list":[2.5]}`, in{}, idem.CodeInvalidArguments},
	} {
		got = nil
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add", Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatal(err)
		}
		if c.code != "" {
			if !res.IsError || res.Meta[idem.MetaError] != string(c.code) || len(got) != 0 {
				t.Errorf("%s: %s, want %s and no run", c.args, mustJSON(res), c.code)
			}
			continue
		}
		if res.IsError || len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
			t.Errorf("%s: %s, handler got %+v, want %+v", c.args, mustJSON(res), got, c.want)
		}
	}
}

// A record key or an op id whose text is not valid UTF-8 is refused with a
// code: decoded, "u8\xff" and "u8\xfe" (or two lone surrogates) would both
// be "u8\uFFFD" and name one record.
func TestInvalidUTF8KeysAndOpIDsRefused(t *testing.T) {
	var ran []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	type in struct {
		Device string `json:"device"`
	}
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, v in) (*mcp.CallToolResult, any, error) {
		ran = append(ran, v.Device)
		return nil, nil, nil
	}
	idem.AddTool(srv, &mcp.Tool{Name: "keyed"}, memory.New(nil), h, idem.RecordKeys("device"))
	idem.AddTool(srv, &mcp.Tool{Name: "op"}, memory.New(nil), h, idem.RequireOpID())
	cs := connectInMemory(t, srv)
	for _, c := range []struct {
		tool, args string
		code       idem.Code // "" for accepted
	}{
		{"keyed", "{\"device\":\"u8\xff\"}", idem.CodeInvalidArguments},
		{"keyed", "{\"device\":\"u8\xfe\"}", idem.CodeInvalidArguments},
		{"keyed", `{"device":"u8\ud800"}`, idem.CodeInvalidArguments},
		{"keyed", `{"device":"u8\udc00\ud800"}`, idem.CodeInvalidArguments},
		{"keyed", `{"device":"u8\ud800x"}`, idem.CodeInvalidArguments},
		{"keyed", `{"device":"u8\ud83d\ude00"}`, ""},
		{"keyed", `{"device":"u8\ufffd"}`, ""},
		{"keyed", `{"device":"u8\\ud800"}`, ""},
		{"keyed", `{"device":"é\"\n"}`, ""},
		{"op", "{\"device\":\"d\",\"op_id\":\"op\xff\"}", idem.CodeInvalidOpID},
		{"op", `{"device":"d","op_id":"op\ud800"}`, idem.CodeInvalidOpID},
	} {
		ran = nil
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		switch {
		case c.code == "" && (res.IsError || len(ran) != 1):
			t.Errorf("%q: %s, want it run", c.args, mustJSON(res))
		case c.code != "" && (!res.IsError || res.Meta[idem.MetaError] != string(c.code) || len(ran) != 0):
			t.Errorf("%q: %s (ran %d), want %s and no run", c.args, mustJSON(res), len(ran), c.code)
		case c.code != "" && strings.Contains(textOf(res), "u8"):
			t.Errorf("%q: the refusal quotes the value: %s", c.args, textOf(res))
		}
	}
}
