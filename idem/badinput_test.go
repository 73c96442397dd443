package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

var update = flag.Bool("update", false, "rewrite the generated table of docs/clients.md")

// storyIn is the input of the tools the bad-input table is tried on.
type storyIn struct {
	Slug  string `json:"slug" jsonschema:"the story's key"`
	Title string `json:"title" jsonschema:"the title"`
	Words int    `json:"words,omitempty" jsonschema:"the word count"`
}

// TestBadInputTable sends every bad input the table in docs/clients.md
// lists to a keyed tool that accepts op ids (publish) and to one that
// requires them (append), and checks that each is refused with a code,
// that the handler did not run, and that nothing was written: no story,
// no op record. The table in the page is this test's output (go test
// ./idem -run BadInputTable -update rewrites it); a difference fails.
func TestBadInputTable(t *testing.T) {
	long := strings.Repeat("x", 129)
	cases := []struct {
		what, tool, args string
		meta             map[string]any
	}{
		{"arguments that are not an object", "publish", `[1,2]`, nil},
		{"no arguments (null)", "publish", `null`, nil},
		{"the record key missing", "publish", `{"title":"t"}`, nil},
		{"the record key null", "publish", `{"slug":null,"title":"t"}`, nil},
		{"the record key empty", "publish", `{"slug":"","title":"t"}`, nil},
		{"the record key an escaped lone surrogate", "publish", `{"slug":"s\ud800","title":"t"}`, nil},
		{"the record key a number", "publish", `{"slug":7,"title":"t"}`, nil},
		{"a required argument missing", "publish", `{"slug":"s"}`, nil},
		{"an argument of the wrong type", "publish", `{"slug":"s","title":"t","words":"many"}`, nil},
		{"a fractional number for an integer", "publish", `{"slug":"s","title":"t","words":1.5}`, nil},
		{"an argument the schema does not have", "publish", `{"slug":"s","title":"t","secret_field":"v"}`, nil},
		{"op_id empty", "publish", `{"slug":"s","title":"t","op_id":""}`, nil},
		{"op_id with a space", "publish", `{"slug":"s","title":"t","op_id":"a b"}`, nil},
		{"op_id of 129 characters", "publish", `{"slug":"s","title":"t","op_id":"` + long + `"}`, nil},
		{"op_id not ASCII", "publish", `{"slug":"s","title":"t","op_id":"é"}`, nil},
		{"op_id a number", "publish", `{"slug":"s","title":"t","op_id":7}`, nil},
		{"op_id null", "publish", `{"slug":"s","title":"t","op_id":null}`, nil},
		{"the _meta op id a number", "publish", `{"slug":"s","title":"t"}`, map[string]any{idem.MetaOpID: 7}},
		{"op_id and the _meta op id differ", "publish", `{"slug":"s","title":"t","op_id":"a"}`, map[string]any{idem.MetaOpID: "b"}},
		{"no op_id where one is required", "append", `{"slug":"s","title":"t"}`, nil},
		{"an op_id reused with other arguments", "append", `{"slug":"s","title":"second-title","op_id":"used"}`, nil},
	}
	ctx := context.Background()
	var runs atomic.Int64
	newTools := func() (idem.Store, map[string]mcp.ToolHandlerFor[storyIn, any]) {
		s := memory.New(nil)
		h := func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in storyIn) (*mcp.CallToolResult, any, error) {
			runs.Add(1)
			return nil, map[string]string{"slug": in.Slug}, tx.Put(ctx, idem.Key{Collection: "stories", ID: in.Slug + "-" + in.Title}, in)
		}
		return s, map[string]mcp.ToolHandlerFor[storyIn, any]{
			"publish": idem.DirectTool(s, h, idem.RecordKeys("slug"), idem.OpID()),
			"append":  idem.DirectTool(s, h, idem.RequireOpID()),
		}
	}
	var table strings.Builder
	table.WriteString("| bad input | tool | code | what the caller reads | writes |\n|---|---|---|---|---|\n")
	for _, c := range cases {
		s, tools := newTools()
		call := func(args string) *mcp.CallToolResult {
			res, _, err := tools[c.tool](ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
				Name: c.tool, Arguments: json.RawMessage(args), Meta: c.meta}}, storyIn{})
			if err != nil {
				t.Fatalf("%s: protocol error %v", c.what, err)
			}
			return res
		}
		if c.what == "an op_id reused with other arguments" {
			if r := call(`{"slug":"s","title":"first","op_id":"used"}`); r.IsError {
				t.Fatalf("the first use of the op id failed: %s", text(r))
			}
		}
		before := runs.Load()
		res := call(c.args)
		code, _ := res.Meta[idem.MetaError].(string)
		if !res.IsError || code == "" {
			t.Errorf("%s: not refused with a code (IsError %v, code %q)", c.what, res.IsError, code)
		}
		if code == string(idem.CodeInternal) || code == string(idem.CodeNotSaved) {
			t.Errorf("%s: code %s, want a bad-input code", c.what, code)
		}
		writes := "nothing"
		if runs.Load() != before {
			t.Errorf("%s: the handler ran", c.what)
			writes = "the handler ran"
		}
		for _, title := range []string{"t", "second-title"} {
			var got storyIn
			err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				_, err := tx.Get(ctx, idem.Key{Collection: "stories", ID: "s-" + title}, &got)
				return err
			})
			if !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("%s: a story was written (%v)", c.what, err)
				writes = "a story"
			}
		}
		for _, id := range []string{"", "a b", long, "é", "a", "b"} {
			if rec, _ := idem.LookupOp(ctx, s, "", c.tool, id); rec != nil {
				t.Errorf("%s: an op record was written", c.what)
				writes = "an op record"
			}
		}
		msg := text(res)
		for _, v := range []string{"secret_field", "many", long, "second-title"} {
			if strings.Contains(msg, v) && strings.Contains(c.args, v) {
				t.Errorf("%s: the refusal quotes the caller's %q: %s", c.what, v, msg)
			}
		}
		shown := c.args
		if len(shown) > 60 {
			shown = shown[:40] + "…" + shown[len(shown)-12:]
		}
		if c.meta != nil {
			m, _ := json.Marshal(c.meta)
			shown += ", _meta " + string(m)
		}
		fmt.Fprintf(&table, "| %s: `%s` | %s | `%s` | %s | %s |\n", c.what, shown, c.tool, code, strings.ReplaceAll(msg, "|", "\\|"), writes)
	}
	checkPageTable(t, "BadInputTable", table.String())
}

// checkPageTable checks that the table of docs/clients.md that the test
// named writes is table, or rewrites it with -update.
func checkPageTable(t *testing.T, test, table string) {
	t.Helper()
	const page = "../docs/clients.md"
	begin, end := "<!-- table: go test ./idem -run "+test+" -update -->\n", "<!-- end of table -->\n"
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(doc), begin)
	j := strings.Index(string(doc[max(i, 0):]), end) + max(i, 0)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated table between %q and %q", page, begin, end)
	}
	want := string(doc[:i+len(begin)]) + table + string(doc[j:])
	if *update {
		if err := os.WriteFile(page, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(doc) != want {
		t.Errorf("%s's table is not what the middleware answers now: run go test ./idem -run %s -update and read the difference", page, test)
	}
}

// TestStatusRefusalTable sends get_operation every lookup it cannot answer
// and checks that each is refused with a code and words about what a
// lookup needs, that the refusal quotes nothing the caller sent and
// carries no structured content. The second table of docs/clients.md is
// its output.
func TestStatusRefusalTable(t *testing.T) {
	long := strings.Repeat("x", 129)
	noUser := &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{}}
	cases := []struct {
		what, args string
		meta       map[string]any
		extra      *mcp.RequestExtra
		opts       *idem.Options
	}{
		{what: "arguments that are not an object", args: `[1,2]`},
		{what: "no arguments (null)", args: `null`},
		{what: "no op id", args: `{"tool":"add"}`},
		{what: "op_id empty", args: `{"tool":"add","op_id":""}`},
		{what: "op_id a number", args: `{"tool":"add","op_id":7}`},
		{what: "op_id null", args: `{"tool":"add","op_id":null}`},
		{what: "op_id of 129 characters", args: `{"tool":"add","op_id":"` + long + `"}`},
		{what: "op_id with a space", args: `{"tool":"add","op_id":"a b"}`},
		{what: "the _meta op id a number", args: `{"tool":"add"}`, meta: map[string]any{idem.MetaOpID: 7}},
		{what: "op_id and the _meta op id differ", args: `{"tool":"add","op_id":"a"}`, meta: map[string]any{idem.MetaOpID: "b"}},
		{what: "no tool", args: `{"op_id":"a"}`},
		{what: "tool empty", args: `{"tool":"","op_id":"a"}`},
		{what: "tool a number", args: `{"tool":7,"op_id":"a"}`},
		{what: "an argument get_operation does not have", args: `{"tool":"add","op_id":"a","secret_field":"v"}`},
		{what: "no caller, on a server with RequireScope", args: `{"tool":"add","op_id":"a"}`, opts: &idem.Options{RequireScope: true}},
		{what: "a token without a user id", args: `{"tool":"add","op_id":"a"}`, extra: noUser},
	}
	ctx := context.Background()
	var table strings.Builder
	table.WriteString("| lookup | code | what the caller reads |\n|---|---|---|\n")
	for _, c := range cases {
		h := idem.StatusHandler(idem.New(memory.New(nil), c.opts))
		res, err := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
			Name: idem.StatusToolName, Arguments: json.RawMessage(c.args), Meta: c.meta}, Extra: c.extra})
		if err != nil {
			t.Fatalf("%s: protocol error %v", c.what, err)
		}
		code, _ := res.Meta[idem.MetaError].(string)
		msg := text(res)
		switch {
		case !res.IsError || code == "":
			t.Errorf("%s: not refused with a code: %s", c.what, mustJSON(res))
		case code == string(idem.CodeInternal) || code == string(idem.CodeNotSaved):
			t.Errorf("%s: code %s, want a bad-input code", c.what, code)
		case res.StructuredContent != nil:
			t.Errorf("%s: the refusal carries structured content", c.what)
		case !strings.Contains(msg, "op id") && !strings.Contains(msg, "get_operation") && !strings.Contains(msg, "operation"):
			t.Errorf("%s: the refusal does not say what a lookup needs: %s", c.what, msg)
		}
		// Words about writes, not lookups.
		for _, w := range []string{"mint", "this tool", "schema", "first attempt"} {
			if strings.Contains(msg, w) {
				t.Errorf("%s: the refusal says %q: %s", c.what, w, msg)
			}
		}
		for _, v := range []string{"secret_field", long, "a b", `"a"`, `"b"`} {
			if strings.Contains(msg, v) {
				t.Errorf("%s: the refusal quotes the caller's %q: %s", c.what, v, msg)
			}
		}
		shown := c.args
		if len(shown) > 60 {
			shown = shown[:30] + "…" + shown[len(shown)-12:]
		}
		if c.meta != nil {
			m, _ := json.Marshal(c.meta)
			shown += ", _meta " + string(m)
		}
		fmt.Fprintf(&table, "| %s: `%s` | `%s` | %s |\n", c.what, shown, code, strings.ReplaceAll(msg, "|", "\\|"))
	}
	checkPageTable(t, "StatusRefusalTable", table.String())
}

// A lookup get_operation refuses is reported like any other call: one
// event to the Tracer (and a log record) with its code.
func TestStatusRefusalIsReported(t *testing.T) {
	var tr tracer
	h := idem.StatusHandler(idem.New(memory.New(nil), &idem.Options{Tracer: &tr}))
	res, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
		Name: idem.StatusToolName, Arguments: json.RawMessage(`{"tool":"add"}`)}})
	if err != nil || !res.IsError {
		t.Fatalf("a lookup without an op id: %v %s, want refused", err, mustJSON(res))
	}
	if events := tr.events(); len(events) != 1 || events[0].Outcome() != "refused" || events[0].Code != idem.CodeInvalidOpID {
		t.Fatalf("events %+v, want one refused with invalid_op_id", events)
	}
}

// A member whose name differs from a property's only in case is not that
// property, as the go-sdk decodes a tool's input: under a schema that allows
// other members, {"text":"ok","TEXT":"far too long"} passes the schema with
// text "ok", and the handler gets "ok", never the value the schema did not
// check.
func TestArgumentNamesMatchExactly(t *testing.T) {
	type in struct {
		Text string `json:"text"`
	}
	var got []string
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"text": {Type: "string", MaxLength: new(3)}}}
	_, h := idem.Tool(&mcp.Tool{Name: "note", InputSchema: schema}, memory.New(nil),
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
			got = append(got, in.Text)
			return nil, nil, nil
		}, idem.OpID())
	for i, args := range []string{`{"text":"ok","TEXT":"far too long"}`, `{"TEXT":"far too long","text":"ok","op_id":"op-1"}`} {
		res, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "note", Arguments: json.RawMessage(args)}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %s", i, err, mustJSON(res))
		}
	}
	if fmt.Sprint(got) != "[ok ok]" {
		t.Errorf("the handler got %q, want the checked text twice", got)
	}
}
