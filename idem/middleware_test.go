package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
	"sync/atomic"
)

// A result that asks the client for input is answered but never stored, and
// the handler's writes roll back: the client's retry with InputResponses
// runs the handler again.
func TestInputRequestsAreNeverStored(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	k := idem.Key{Collection: "notes", ID: "n"}
	runs := 0
	h := idem.DirectTool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		runs++
		if err := tx.Put(ctx, k, in); err != nil {
			return nil, nil, err
		}
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?"}}}, nil, nil
		}
		return nil, nil, nil
	}, idem.OpID())
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "add", Arguments: json.RawMessage(`{"text":"x","op_id":"op-mrtr"}`)}}
	res, _, err := h(ctx, req, Note{Text: "x"})
	if err != nil || res == nil || res.InputRequests == nil {
		t.Fatalf("first call: %v %+v", err, res)
	}
	if _, err := idem.LookupOp(ctx, s, "", "add", "op-mrtr"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("input-required result stored: %v", err)
	}
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	if !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("write of an input-required call kept: %v", err)
	}
	req.Params.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}
	res, _, err = h(ctx, req, Note{Text: "x"})
	if err != nil || (res != nil && res.IsError) {
		t.Fatalf("retry: %v", err)
	}
	if runs != 2 {
		t.Fatalf("handler ran %d times, want 2", runs)
	}
	if _, err := idem.LookupOp(ctx, s, "", "add", "op-mrtr"); err != nil {
		t.Fatalf("completed call not stored: %v", err)
	}
}

// Logs name the tool and the fingerprint of the arguments, never their
// values, and hooks see the same.
func TestLogsAndHooksCarryNoArguments(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	var tr tracer
	guard := idem.New(memory.New(nil), &idem.Options{Tracer: &tr, Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	h := idem.DirectTool(guard, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		if in.Text == "boom" {
			panic("handler bug with " + in.Text)
		}
		return nil, nil, nil
	}, idem.OpID())
	call := func(text string) *mcp.CallToolResult {
		args, _ := json.Marshal(map[string]string{"text": text, "op_id": "op-log"})
		res, _, err := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "note", Arguments: args}}, Note{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	const secret = "SECRET-first-words"
	call(secret)
	call(secret)               // replay
	call("SECRET-other-words") // key reuse
	events := tr.events()
	if len(events) != 3 || events[0].Outcome() != "first" || events[1].Outcome() != "replay" ||
		events[2].Outcome() != "refused" || events[2].Code != idem.CodeKeyReused || events[1].Fingerprint == "" || events[2].Tool != "note" {
		t.Fatalf("hook events %+v, want a first call, a replay and a key reuse with fingerprints", events)
	}
	logs := buf.String()
	if !strings.Contains(logs, events[1].Fingerprint) || !strings.Contains(logs, `"code":"key_reused"`) {
		t.Errorf("logs lack the fingerprint or the key reuse:\n%s", logs)
	}
	if strings.Contains(logs, "SECRET") {
		t.Errorf("logs carry argument values:\n%s", logs)
	}
	res, _, _ := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "note", Arguments: json.RawMessage(`{"text":"boom","op_id":"op-panic"}`)}}, Note{Text: "boom"})
	if res == nil || !res.IsError || strings.Contains(fmt.Sprint(res.Content[0]), "boom") {
		t.Errorf("panic result %+v: want an internal refusal that does not echo the panic", res)
	}
	if !strings.Contains(buf.String(), "panicked") {
		t.Error("the panic was not logged")
	}
}

// FuzzToolCall sends arbitrary arguments and _meta op ids through the
// middleware: it never panics, refuses bad op ids with invalid_op_id and
// writes nothing for them, never echoes an argument in a refusal, and a
// repeat of an accepted call is replayed.
func FuzzToolCall(f *testing.F) {
	f.Add([]byte(`{"text":"a","op_id":"k1"}`), "")
	f.Add([]byte(`{"text":"a"}`), "k2")
	f.Add([]byte(`{"text":"a","op_id":"x"}`), "y")
	f.Add([]byte(`{"text":"a","op_id":7}`), "")
	f.Add([]byte(`{"text":"a","op_id":"has space"}`), "")
	f.Add([]byte(`[1,2]`), "")
	f.Fuzz(func(t *testing.T, args []byte, metaOpID string) {
		ctx := context.Background()
		s := memory.New(nil)
		runs := 0
		h := idem.DirectTool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
			runs++
			return nil, Added{ID: "n"}, tx.Put(ctx, idem.Key{Collection: "notes", ID: "n"}, in)
		}, idem.OpID())
		var in Note
		_ = json.Unmarshal(args, &in)
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "note", Arguments: args}}
		if metaOpID != "" {
			req.Params.Meta = mcp.Meta{idem.MetaOpID: metaOpID}
		}
		res, _, err := h(ctx, req, in)
		if err != nil {
			t.Fatalf("a protocol error instead of a tool result: %v", err)
		}
		if res != nil && res.IsError {
			code, _ := res.Meta[idem.MetaError].(string)
			if code == "" {
				t.Fatalf("refusal without a code: %+v", res)
			}
			if runs != 0 {
				t.Fatalf("refused call (%s) ran the handler", code)
			}
			text := fmt.Sprint(res.Content)
			for _, s := range []string{string(args), metaOpID, in.Text} {
				if len(s) >= 6 && strings.Contains(text, s) {
					t.Fatalf("refusal %q echoes input %q", text, s)
				}
			}
			return
		}
		if !idem.HasOpID(req) {
			return
		}
		again, _, err := h(ctx, req, in)
		if err != nil || again.Meta[idem.MetaReplayed] != true || runs != 1 {
			t.Fatalf("repeat: err=%v replayed=%v runs=%d", err, again.Meta[idem.MetaReplayed], runs)
		}
	})
}

// A handler may return a result of its own (to set _meta, say) without
// content, beside a typed output: the SDK then adds the output as text, and
// the replay must get the same.
func TestReplayOfResultWithoutContent(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	runs := 0
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
		runs++
		return &mcp.CallToolResult{Meta: mcp.Meta{"x": 1}}, Added{ID: "n-1"}, tx.Put(ctx, idem.Key{Collection: "n", ID: "n-1"}, in)
	}, idem.OpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"text": "x", "op_id": "op-1"}
	var answers []string
	for range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, mustJSON(res.Content)+mustJSON(res.StructuredContent))
	}
	if runs != 1 || answers[0] != answers[1] || !strings.Contains(answers[0], `"text":"{\"id\":\"n-1\"}"`) {
		t.Errorf("runs=%d\n first: %s\nreplay: %s", runs, answers[0], answers[1])
	}
}

// An output of interface type (any) has no output schema, so the SDK sends
// the handler's encoding as is; the replay must send the same bytes, not a
// decoded map with float64 numbers and sorted keys.
func TestReplayOfAnyOutputIsByteForByte(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, json.RawMessage(`{"zeta":9007199254740993,"alpha":"x"}`), nil
	}, idem.OpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	first, second, err := idemtest.SendTwice(ctx, cs, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "x", "op_id": "op-any"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := idemtest.SameAnswer(first, second); err != nil || second.Meta[idem.MetaReplayed] != true {
		t.Errorf("replayed=%v: %v", second.Meta[idem.MetaReplayed], err)
	}
}

type shape interface{ Area() int }

type square struct {
	Side int `json:"side"`
}

func (s square) Area() int { return s.Side * s.Side }

// An output that encodes but could not be decoded into its Go type again
// (an interface field) replays as it was first sent: the stored structured
// content goes back byte for byte, and the handler does not run again.
func TestInterfaceOutputReplays(t *testing.T) {
	ctx := context.Background()
	type drawn struct {
		Shape shape `json:"shape"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	runs := 0
	idem.AddTool(srv, &mcp.Tool{Name: "draw"}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, drawn, error) {
		runs++
		return nil, drawn{Shape: square{Side: 2}}, nil
	}, idem.OpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	first, second, err := idemtest.SendTwice(ctx, cs, &mcp.CallToolParams{Name: "draw", Arguments: map[string]any{"text": "x", "op_id": "op-shape"}})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 1 || second.IsError || second.Meta[idem.MetaReplayed] != true || mustJSON(second.StructuredContent) != `{"shape":{"side":2}}` {
		t.Errorf("runs=%d replay %s", runs, mustJSON(second))
	}
	if err := idemtest.SameAnswer(first, second); err != nil {
		t.Error(err)
	}
}

// A tool whose output schema its zero output does not meet still gets its
// refusals as refusals, not as protocol errors.
func TestRefusalWithStrictOutputSchema(t *testing.T) {
	ctx := context.Background()
	type post struct {
		Kind string `json:"kind" jsonschema:"post or page"`
	}
	out, err := jsonschema.For[post](nil)
	if err != nil {
		t.Fatal(err)
	}
	out.Properties["kind"].Enum = []any{"post", "page"}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "publish", OutputSchema: out}, memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, post, error) {
		return nil, post{Kind: "post"}, nil
	}, idem.OpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "publish", Arguments: args})
		if err != nil {
			t.Fatalf("protocol error instead of a refusal: %v", err)
		}
		return res
	}
	if r := call(map[string]any{"text": "a", "op_id": ""}); r.Meta[idem.MetaError] != string(idem.CodeInvalidOpID) {
		t.Errorf("invalid op id: %s", mustJSON(r))
	}
	call(map[string]any{"text": "a", "op_id": "op-p"})
	if r := call(map[string]any{"text": "b", "op_id": "op-p"}); r.Meta[idem.MetaError] != string(idem.CodeKeyReused) || r.StructuredContent != nil {
		t.Errorf("key reuse: %s", mustJSON(r))
	}
}

// addressed writes "pointer" when encoding/json can take its address (its
// MarshalJSON is on the pointer), and its fields when it cannot.
type addressed struct {
	V string `json:"v"`
}

func (*addressed) MarshalJSON() ([]byte, error) { return []byte(`"pointer"`), nil }

type withAddressed struct {
	Field addressed    `json:"field"`
	Arr   [1]addressed `json:"arr"`
	Slice []addressed  `json:"slice"`
	Map   map[string]addressed
}

type plainOut struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

// The structured output is what encoding/json writes for the handler's Out
// value, as the SDK sends it, whether or not the middleware encodes it
// through a pointer: a MarshalJSON that only a pointer has is called where
// encoding/json can take the address of a value (a slice element), and
// nowhere else (a field, an array element, a map value).
func TestOutputEncodedAsTheValue(t *testing.T) {
	checkOutputEncoding(t, withAddressed{Field: addressed{"f"}, Arr: [1]addressed{{"a"}}, Slice: []addressed{{"s"}}, Map: map[string]addressed{"k": {"m"}}})
	checkOutputEncoding(t, plainOut{ID: "n-1", Tags: []string{"x"}})
}

// checkOutputEncoding checks that a handler returning out sends what
// encoding/json writes for out, on a first call and its replay.
func checkOutputEncoding[Out any](t *testing.T, out Out) {
	t.Helper()
	// A schema that takes any object: what is checked here is the
	// encoding, and a MarshalJSON on the pointer writes what the type's
	// inferred schema does not say.
	_, handle := idem.Tool(&mcp.Tool{Name: "tool", OutputSchema: &jsonschema.Schema{Type: "object"}}, memory.New(nil),
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Out, error) {
			return nil, out, nil
		}, idem.OpID())
	h := func(ctx context.Context, req *mcp.CallToolRequest, _ Note) (*mcp.CallToolResult, Out, error) {
		res, err := handle(ctx, req)
		var zero Out
		return res, zero, err
	}
	want, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, opID := range []string{"", `,"op_id":"op-out"`} {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "tool", Arguments: json.RawMessage(`{"text":"x"` + opID + `}`)}}
		for range 2 { // a first call, then a replay when there is an op id
			res, _, err := h(context.Background(), req, Note{})
			if err != nil || res == nil || res.IsError {
				t.Fatalf("%T: %v %+v", out, err, res)
			}
			if got := mustJSON(res.StructuredContent); got != string(want) {
				t.Errorf("%T, op id %q: structured content %s, want %s", out, opID, got, want)
			}
		}
	}
}

// Arguments of white space only are no arguments: refused as not matching
// the tool's input, and the handler does not run.
func TestWhiteSpaceArguments(t *testing.T) {
	runs := 0
	call := countingTool[struct{}](&runs)
	res, err := call(" \n ")
	if err != nil || res == nil || !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidArguments) || runs != 0 {
		t.Errorf("runs=%d err=%v result %s", runs, err, mustJSON(res))
	}
}

// countingTool wraps, with an op id, a handler on a fresh memory store that
// only counts its runs, and returns a function calling it with arguments as
// sent.
func countingTool[In any](runs *int) func(args string) (*mcp.CallToolResult, error) {
	h := idem.DirectTool(memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		*runs++
		return nil, nil, nil
	}, idem.OpID())
	return func(args string) (*mcp.CallToolResult, error) {
		var in In
		res, _, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "tool", Arguments: json.RawMessage(args)}}, in)
		return res, err
	}
}

// TestLastOfDuplicateOpIDs: of two op_id members, the last is the op id, as
// the schema check and encoding/json read the arguments: the call is kept
// under it, and a repeat with the first alone runs again.
func TestLastOfDuplicateOpIDs(t *testing.T) {
	runs := 0
	tool := countingTool[struct{}](&runs)
	call := func(args string) *mcp.CallToolResult {
		t.Helper()
		res, err := tool(args)
		if err != nil || res == nil || res.IsError {
			t.Fatalf("%s: err=%v result %s", args, err, mustJSON(res))
		}
		return res
	}
	call(`{"op_id":"op-first","op_id":"op-last"}`)
	if res := call(`{"op_id":"op-last"}`); runs != 1 || res.Meta[idem.MetaReplayed] != true {
		t.Errorf("the last op id: runs=%d, result %s; want a replay", runs, mustJSON(res))
	}
	if res := call(`{"op_id":"op-first"}`); runs != 2 || res.Meta[idem.MetaReplayed] == true {
		t.Errorf("the first op id: runs=%d, result %s; want a first call", runs, mustJSON(res))
	}
}

// TestDeeplyNestedArgumentsAreRefused: arguments nested deeper than
// encoding/json reads are refused with invalid_arguments before the handler
// runs, on a tool whose schema takes any value for the property; the
// refusal quotes none of them.
func TestDeeplyNestedArgumentsAreRefused(t *testing.T) {
	runs := 0
	call := countingTool[struct {
		A any `json:"a"`
	}](&runs)
	const depth = 10_001
	res, err := call(`{"op_id":"op-1","a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	if err != nil || res == nil || !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidArguments) || runs != 0 {
		t.Fatalf("runs=%d err=%v meta %v", runs, err, res.Meta)
	}
	if text := mustJSON(res.Content); strings.Contains(text, "[[") || strings.Contains(text, "op-1") {
		t.Errorf("the refusal quotes the arguments: %s", text)
	}
}

// tracer is an idem.Tracer that keeps the events it is told of.
type tracer struct {
	mu  sync.Mutex
	got []idem.Event
}

func (t *tracer) StartCall(ctx context.Context, c idem.CallInfo) context.Context { return ctx }

func (t *tracer) EndCall(ctx context.Context, e idem.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.got = append(t.got, e)
}

func (t *tracer) events() []idem.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.got)
}

// countedNote counts its decodings.
type countedNote struct {
	Text string `json:"text"`
}

var countedDecodings atomic.Int64

func (n *countedNote) UnmarshalJSON(b []byte) error {
	countedDecodings.Add(1)
	type plain countedNote
	return json.Unmarshal(b, (*plain)(n))
}

// A repeat whose arguments are the same bytes as a call of its op answered
// lately passed the input check then: it is answered without decoding them
// again. The same arguments in other bytes are checked and decoded, and
// still answered from the record.
func TestRepeatOfTheSameBytesIsNotDecoded(t *testing.T) {
	runs := 0
	call := countingTool[countedNote](&runs)
	countedDecodings.Store(0)
	for i, c := range []struct {
		args      string
		decodings int64
	}{
		{`{"text":"a","op_id":"op-1"}`, 1},  // the first call
		{`{"text":"a","op_id":"op-1"}`, 1},  // the same bytes
		{`{"op_id":"op-1","text":"a"}`, 2},  // other bytes, the same arguments
		{`{"op_id":"op-1", "text":"a"}`, 3}, // and again
		{`{"text":"b","op_id":"op-1"}`, 4},  // other arguments: key_reused
		{`{"op_id":"op-1", "text":"a"}`, 4}, // the bytes of the last answer
		{`{"text":"a","op_id":"op-1"}`, 5},  // the first bytes: no longer the ones remembered
	} {
		res, err := call(c.args)
		if err != nil || res == nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := countedDecodings.Load(); got != c.decodings {
			t.Errorf("call %d (%s): %d decodings in all, want %d", i, c.args, got, c.decodings)
		}
		wantCode := ""
		if strings.Contains(c.args, `"b"`) {
			wantCode = string(idem.CodeKeyReused)
		}
		if code, _ := res.Meta[idem.MetaError].(string); code != wantCode {
			t.Errorf("call %d: code %q, want %q", i, code, wantCode)
		}
	}
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
}
