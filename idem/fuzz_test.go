package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

type fuzzIn struct {
	Slug  string            `json:"slug" jsonschema:"the story's key"`
	Title string            `json:"title,omitempty" jsonschema:"a title"`
	N     int               `json:"n,omitempty"`
	Tags  []string          `json:"tags,omitempty"`
	Extra map[string]string `json:"extra,omitempty"`
}

type fuzzOut struct {
	Slug  string `json:"slug"`
	Title string `json:"title"`
}

// refusalCodes are the codes bad input may get; internal, not_saved and
// the others would mean the middleware failed on input it should refuse.
var refusalCodes = map[string]bool{
	string(idem.CodeMissingKey): true, string(idem.CodeInvalidOpID): true,
	string(idem.CodeInvalidArguments): true, string(idem.CodeKeyReused): true,
}

// FuzzCall sends a keyed tool that accepts op ids whatever arguments and
// _meta a caller can send, twice. The middleware must not panic; it must
// answer both calls alike (the tool is idempotent); a refusal must carry a
// code a bad input gets and must not quote a value of the caller's.
func FuzzCall(f *testing.F) {
	f.Add([]byte(`{"slug":"a","title":"t","op_id":"op-1"}`), []byte(`{}`))
	f.Add([]byte(`{"slug":"a","n":1.5}`), []byte(`{"io.idemkit/op_id":"op-2"}`))
	f.Add([]byte(`{"title":"no slug here at all"}`), []byte(`null`))
	f.Add([]byte(`{"slug":"b","op_id":"has a space in it"}`), []byte(`{"io.idemkit/op_id":7}`))
	f.Add([]byte(`{"slug":"c","extra":{"secret-key-name":"secret-value-here"},"tags":[1]}`), []byte(`{}`))
	f.Add([]byte(`[1,2]`), []byte(`{}`))
	f.Add([]byte(`{"slug":"d","unknown_property_name":"whatever value"}`), []byte(`{}`))
	s := memory.New(nil)
	h := idem.DirectTool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in fuzzIn) (*mcp.CallToolResult, fuzzOut, error) {
		return nil, fuzzOut{Slug: in.Slug, Title: in.Title}, tx.Put(ctx, idem.Key{Collection: "stories", ID: in.Slug}, in)
	}, idem.RecordKeys("slug"), idem.OpID())
	call := func(args, meta []byte) *mcp.CallToolResult {
		params := &mcp.CallToolParamsRaw{Name: "tool", Arguments: json.RawMessage(args)}
		var m map[string]any
		if json.Unmarshal(meta, &m) == nil {
			params.Meta = m
		}
		res, _, err := h(context.Background(), &mcp.CallToolRequest{Params: params}, fuzzIn{})
		if err != nil {
			f.Fatalf("protocol error: %v", err)
		}
		return res
	}
	f.Fuzz(func(t *testing.T, args, meta []byte) {
		first, second := call(args, meta), call(args, meta)
		if first == nil || second == nil {
			t.Fatal("no result")
		}
		if first.IsError != second.IsError {
			t.Fatalf("the repeat answered otherwise: %v then %v", text(first), text(second))
		}
		if !first.IsError {
			a, _ := json.Marshal(first.StructuredContent)
			b, _ := json.Marshal(second.StructuredContent)
			if string(a) != string(b) {
				t.Fatalf("the repeat answered %s, the first %s", b, a)
			}
			return
		}
		code, _ := first.Meta[idem.MetaError].(string)
		if !refusalCodes[code] {
			t.Fatalf("input refused with code %q: %s", code, text(first))
		}
		// A caller's value may appear in the refusal only where it is
		// one of the message's own words: the same call with every string
		// replaced by one of the same length must give the same words.
		msg := text(first)
		for _, v := range callerStrings(args, meta) {
			if len(v) >= 8 && strings.Contains(msg, v) && !strings.Contains(text(call(masked(args, v), masked(meta, v))), v) {
				t.Fatalf("the refusal quotes the caller's %q: %s", v, msg)
			}
		}
	})
}

// text is a result's text content.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// callerStrings returns the strings in a JSON document: member names and
// string values, at any depth.
func callerStrings(docs ...[]byte) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				out = append(out, k)
				walk(e)
			}
		}
	}
	for _, d := range docs {
		var v any
		if json.Unmarshal(d, &v) == nil {
			walk(v)
		}
	}
	return out
}

// masked returns doc with every occurrence of v replaced by as many Qs.
func masked(doc []byte, v string) []byte {
	enc, _ := json.Marshal(v)
	q, _ := json.Marshal(strings.Repeat("Q", len(v)))
	return []byte(strings.ReplaceAll(string(doc), string(enc[1:len(enc)-1]), string(q[1:len(q)-1])))
}
