package idem_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// wireTools returns each tool's description as tools/list sends it over
// streamable HTTP, the bytes a client reads before it shows them to its
// model: a raw JSON-RPC request, no client library in between.
func wireTools(t *testing.T, srv *mcp.Server) map[string]string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ts := httptest.NewServer(h)
	defer ts.Close()
	req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result struct {
			Tools []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(body), &msg); err != nil || len(msg.Result.Tools) == 0 {
		t.Fatalf("tools/list over HTTP: status %d, %v: %s", resp.StatusCode, err, body)
	}
	out := map[string]string{}
	for _, tool := range msg.Result.Tools {
		out[tool.Name] = tool.Description
	}
	return out
}

// Every tool idem registers tells the model how to retry it, in the text
// on the wire: a keyed tool to keep its keys, a tool that requires an op id
// to resend the same one (or ask get_operation) and never to mint a new one
// for a retry, an optional op id not to invent one, and a write that is not
// safe to repeat to check before sending it again. No text licenses a new
// op id "for each new operation", which a model after a lost answer reads as
// leave to mint one for its retry.
func TestDescriptionsTellHowToRetry(t *testing.T) {
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	type beat struct {
		SessionID string `json:"session_id"`
		At        string `json:"at"`
	}
	idem.AddTool(srv, &mcp.Tool{Name: "publish", Description: "Publish a story."}, s, noop[storyIn], idem.RecordKeys("slug"))
	idem.AddTool(srv, &mcp.Tool{Name: "heartbeat", Description: "Record a heartbeat."}, s, noop[beat], idem.RecordKeys("session_id", "at"), idem.OpID())
	idem.AddTool(srv, &mcp.Tool{Name: "add_steps", Description: "Add steps."}, s, noop[Note], idem.RequireOpID())
	idem.AddTool(srv, &mcp.Tool{Name: "append", Description: "Append a line."}, s, noop[Note])
	idem.AddTool(srv, &mcp.Tool{Name: "append_queued", Description: "Append a line."}, s, noop[Note], idem.OpID())
	idem.AddTool(srv, &mcp.Tool{Name: "delete", Description: "Delete a note.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, s, noop[Note])
	idem.AddTool(srv, &mcp.Tool{Name: "read", Description: "Read a note.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s, noop[Note])
	idem.RegisterStatusTool(srv, s)
	got := wireTools(t, srv)

	for name, c := range map[string]struct{ want, not []string }{
		"publish": {want: []string{"Publish a story.\n\n", `Safe to retry with the same "slug": it names the record, so a repeat writes it again instead of adding one.`}},
		"heartbeat": {want: []string{`Safe to retry with the same "session_id" and "at": they name the record`,
			"op_id (optional) is for apps", "never invent one"}},
		"add_steps": {
			want: []string{"op_id (required)", "resend the same op_id", "ask get_operation", "never send a new op_id for a retry", "a new op_id is a new operation, done again"},
			not:  []string{"Safe to retry with", "A repeat may act again"},
		},
		"append":        {want: []string{"A repeat may act again: after an error or a lost answer, check whether the call took effect before sending it again."}, not: []string{"op_id"}},
		"append_queued": {want: []string{"A repeat may act again", "op_id (optional)", "never invent one"}},
		"delete":        {want: []string{"Safe to retry: a repeat of the same arguments has no further effect."}},
		"read":          {not: []string{"retry", "repeat", "op_id"}},
		"get_operation": {want: []string{"same op_id"}, not: []string{"A repeat may act again", "Safe to retry"}},
	} {
		d, ok := got[name]
		if !ok {
			t.Errorf("%s: not listed", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(d, w) {
				t.Errorf("%s: description lacks %q:\n%s", name, w, d)
			}
		}
		for _, n := range append(c.not, "for each new operation", "mint a new one") {
			if strings.Contains(d, n) {
				t.Errorf("%s: description says %q:\n%s", name, n, d)
			}
		}
		// Models and clients show the whole text: the notes stay short.
		if len(d) > 560 {
			t.Errorf("%s: description of %d bytes:\n%s", name, len(d), d)
		}
	}
}

// The op_id property says in a line what the value is, and how to retry
// with it is said once: a model reads the description and the schema
// together, and the same paragraph in both is only longer.
func TestOpIDPropertySaysWhatItIsOnce(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil), noop[Note], idem.RequireOpID())
	idem.AddTool(srv, &mcp.Tool{Name: "queue"}, memory.New(nil), noop[Note], idem.OpID())
	for name, want := range map[string]string{"add": "resent unchanged on every retry", "queue": "never invent one"} {
		tool := listTools(t, srv)[name]
		var schema struct {
			Properties map[string]struct{ Description string } `json:"properties"`
		}
		if err := json.Unmarshal([]byte(mustJSON(tool.InputSchema)), &schema); err != nil {
			t.Fatal(err)
		}
		d := schema.Properties["op_id"].Description
		if !strings.Contains(d, want) || len(d) > 160 {
			t.Errorf("%s: op_id property %q, want a line that says %q", name, d, want)
		}
		both := tool.Description + "\n" + mustJSON(tool.InputSchema)
		for _, once := range []string{"never send a new op_id for a retry", "is for apps replaying queued requests"} {
			if n := strings.Count(both, once); n > 1 {
				t.Errorf("%s: %q said %d times in the description and the schema", name, once, n)
			}
		}
	}
}
