package idem_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

type stopIn struct {
	SessionID string `json:"session_id" jsonschema:"the session to stop"`
	EndAt     string `json:"end_at,omitempty"`
}

func noop[In any](ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
	return nil, nil, nil
}

// connectInMemory connects a client to srv, closed at cleanup.
func connectInMemory(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listTools(t *testing.T, srv *mcp.Server) map[string]*mcp.Tool {
	t.Helper()
	ctx := context.Background()
	cs := connectInMemory(t, srv)
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		m[tool.Name] = tool
	}
	return m
}

func TestAddToolMetadataIsHonest(t *testing.T) {
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "stop", Description: "Stop a session."}, s, noop[stopIn], idem.RecordKeys("session_id"), idem.OpID())
	idem.AddTool(srv, &mcp.Tool{Name: "append", Description: "Append."}, s, noop[stopIn])
	idem.RegisterStatusTool(srv, s)
	tools := listTools(t, srv)

	stop := tools["stop"]
	if !stop.Annotations.IdempotentHint || stop.Annotations.ReadOnlyHint {
		t.Errorf("stop annotations %+v: want idempotent, not read-only", stop.Annotations)
	}
	for _, want := range []string{"Stop a session.", `"session_id"`, "op_id", "never invent one"} {
		if !strings.Contains(stop.Description, want) {
			t.Errorf("stop description lacks %q:\n%s", want, stop.Description)
		}
	}
	schema := mustJSON(stop.InputSchema)
	for _, want := range []string{`"op_id"`, `"the session to stop. Record key: names the record`} {
		if !strings.Contains(schema, want) {
			t.Errorf("stop schema lacks %q: %s", want, schema)
		}
	}
	if tools["append"].Annotations.IdempotentHint {
		t.Error("a tool with no key and no op id claims to be idempotent")
	}
	if strings.Contains(mustJSON(tools["append"].InputSchema), "op_id") {
		t.Error("a tool without OpID advertises op_id")
	}
	st := tools[idem.StatusToolName]
	if !st.Annotations.ReadOnlyHint || (st.Annotations.DestructiveHint != nil && *st.Annotations.DestructiveHint) ||
		st.Annotations.OpenWorldHint == nil || *st.Annotations.OpenWorldHint {
		t.Errorf("get_operation annotations %+v", st.Annotations)
	}
}

func TestAddToolLeavesCallerToolAlone(t *testing.T) {
	tool := &mcp.Tool{Name: "stop", Description: "Stop.", InputSchema: &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"session_id": {Type: "string"}},
	}}
	before := mustJSON(tool)
	idem.AddTool(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil), tool, memory.New(nil), noop[stopIn], idem.RecordKeys("session_id"), idem.OpID())
	if after := mustJSON(tool); after != before {
		t.Errorf("AddTool modified the caller's tool:\n%s\n%s", before, after)
	}
}

func TestAddToolRefusesContradictions(t *testing.T) {
	yes := true
	for name, tool := range map[string]*mcp.Tool{
		"read-only and destructive": {Name: "x", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}},
		"unknown key":               {Name: "y"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: AddTool did not panic", name)
				}
			}()
			opts := []idem.Option{idem.OpID()}
			if name == "unknown key" {
				opts = append(opts, idem.RecordKeys("no_such_argument"))
			}
			idem.AddTool(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil), tool, memory.New(nil), noop[stopIn], opts...)
		}()
	}
}

// A refusal carries its code and words, not the SDK's zero output dressed as
// structured content.
func TestRefusalHasNoStructuredContent(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	type out struct {
		ID string `json:"id"`
	}
	for _, name := range []string{"a", "b"} { // two tools: the cleanup is installed once
		idem.AddTool(srv, &mcp.Tool{Name: name}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, out, error) {
			return nil, out{ID: "x"}, nil
		}, idem.OpID())
	}
	cs := connectInMemory(t, srv)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b", Arguments: map[string]any{"text": "x", "op_id": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidOpID) {
		t.Fatalf("not refused: %+v", res)
	}
	if res.StructuredContent != nil || len(res.Content) != 1 {
		t.Errorf("refusal carries structured content %v and %d content blocks", res.StructuredContent, len(res.Content))
	}
	ok, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a", Arguments: map[string]any{"text": "x", "op_id": "good"}})
	if err != nil || ok.IsError || mustJSON(ok.StructuredContent) != `{"id":"x"}` {
		t.Errorf("a normal answer lost its structured content: %v %+v", err, ok)
	}
}

// A schema given as raw JSON gets the same treatment as an inferred one.
func TestAddToolRawSchema(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"session_id":{"type":"string"}},"required":["session_id"],"additionalProperties":false}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "stop", InputSchema: raw}, memory.New(nil), noop[stopIn], idem.RecordKeys("session_id"), idem.OpID())
	schema := mustJSON(listTools(t, srv)["stop"].InputSchema)
	if !strings.Contains(schema, `"op_id"`) || !strings.Contains(schema, "Record key") || !strings.Contains(schema, `"required":["session_id"]`) {
		t.Errorf("raw schema not annotated: %s", schema)
	}
	defer func() {
		if recover() == nil {
			t.Error("a key naming no property of a raw schema did not panic")
		}
	}()
	idem.AddTool(srv, &mcp.Tool{Name: "x", InputSchema: raw}, memory.New(nil), noop[stopIn], idem.RecordKeys("nope"))
}

// An In with its own op_id field keeps op_id optional in the schema, and a
// call without one is not refused.
func TestOwnOpIDFieldStaysOptional(t *testing.T) {
	type withOpID struct {
		Text string `json:"text"`
		OpID string `json:"op_id"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), noop[withOpID], idem.OpID())
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(mustJSON(listTools(t, srv)["add"].InputSchema)), &schema); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(schema.Required, "op_id") || !slices.Contains(schema.Required, "text") {
		t.Errorf("required = %v, want text and not op_id", schema.Required)
	}
	cs, err := idemtest.Connect(context.Background(), srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError {
		t.Errorf("a call without op_id was refused: %v %+v", err, res)
	}
}

// get_operation's refusals carry no structured content either, on a server
// where no tool was registered with AddTool.
func TestStatusRefusalHasNoStructuredContent(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.RegisterStatusTool(srv, memory.New(nil))
	cs := connectInMemory(t, srv)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: idem.StatusToolName, Arguments: map[string]any{"tool": "a", "op_id": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.StructuredContent != nil {
		t.Errorf("refusal %s carries structured content", mustJSON(res))
	}
}

// A key's description is its own, ended as a sentence, then what a record
// key is: never two sentences run together or a stray period.
func TestKeyDescriptionIsASentence(t *testing.T) {
	type in struct {
		Month  string `json:"month" jsonschema:"the month"`
		Handle string `json:"handle" jsonschema:"The handle."`
		Slug   string `json:"slug"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "set", Description: "Set."}, memory.New(nil), noop[in], idem.RecordKeys("month", "handle", "slug"))
	var schema struct {
		Properties map[string]struct{ Description string } `json:"properties"`
	}
	if err := json.Unmarshal([]byte(mustJSON(listTools(t, srv)["set"].InputSchema)), &schema); err != nil {
		t.Fatal(err)
	}
	const key = "Record key: names the record this call writes; a repeat with the same value writes the same record."
	for prop, want := range map[string]string{"month": "the month. " + key, "handle": "The handle. " + key, "slug": key} {
		if got := schema.Properties[prop].Description; got != want {
			t.Errorf("%s: description %q, want %q", prop, got, want)
		}
	}
}
