package exserve

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// filler returns n random lowercase letters: any run of 16 of them in an
// answer comes from the request.
func filler(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return string(b)
}

// echoed returns the first run of 16 bytes of ans found in sent, if any.
func echoed(ans []byte, sent string) string {
	for i := 0; i+16 <= len(ans); i++ {
		w := ans[i : i+16]
		if bytes.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) < 0 && strings.Contains(sent, string(w)) {
			return string(w)
		}
	}
	return ""
}

// A method, a tool name or params of 900 KB come back in no answer: a
// method or a name longer than 128 bytes is refused with a JSON-RPC error
// of a fixed text, and the errors the go-sdk answers have what they quote
// elided, whether sent as an event stream, as JSON or as plain text.
func TestNoEcho(t *testing.T) {
	srv, runs := testServer(t)
	url := startServer(t, srv, DefaultLimits())
	big := filler(900 << 10)
	const modern = "2026-07-28"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modern + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}}`
	for _, c := range []struct {
		name, body string
		headers    []string // header, value ("" for none), ...: MCP-Protocol-Version 2025-06-18 unless given
		status     int
		want       string
	}{
		{"tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + big + `","arguments":{}}}`, nil,
			400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid params: a name is longer than 128 bytes"}}`},
		{"prompt name", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + big + `"}}`, nil,
			400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid params: a name is longer than 128 bytes"}}`},
		{"method", `{"jsonrpc":"2.0","id":1,"method":"` + big + `","params":{}}`, nil,
			400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: a method name is longer than 128 bytes"}}`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/` + big + `"}`, nil,
			400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"method not found: a method name is longer than 128 bytes"}}`},
		{"method in a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"` + big + `"}]`, []string{"MCP-Protocol-Version", ""},
			400, `"id":null,"error":{"code":-32601`},
		{"params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"` + big + `"}`, nil,
			200, `"error":{"code":-32602,"message":"handling 'tools/call': invalid params: unmarshaling \"…\" into a *mcp.CallToolParamsRaw: json: cannot unmarshal \"…\" into`},
		{"params in a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"` + big + `"}]`, []string{"MCP-Protocol-Version", ""},
			200, `"error":{"code":-32602,"message":"handling 'tools/call'`},
		{"_meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"id":"n"},"_meta":"` + big + `"}}`, nil,
			200, `"error":{"code":-32602`},
		{"resource", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + big + `"}}`, nil,
			200, `"error":{"code":-32602,"message":"Resource not found"}`},
		{"version tag", `{"jsonrpc":"` + big + `","id":1,"method":"tools/list"}`, nil,
			400, `invalid message version tag "…"`},
		{"prompt answered in JSON", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + big[:100] + `",` + meta + `}}`,
			[]string{"MCP-Protocol-Version", modern, "Mcp-Method", "prompts/get", "Mcp-Name", big[:100]},
			400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown prompt \"…\""}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer tok-a")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			for i := 0; i+1 < len(c.headers); i += 2 {
				if c.headers[i+1] == "" {
					req.Header.Del(c.headers[i])
				} else {
					req.Header.Set(c.headers[i], c.headers[i+1])
				}
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			ans, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != c.status {
				t.Fatalf("%d %v %.300s, want %d", resp.StatusCode, err, ans, c.status)
			}
			if !bytes.Contains(ans, []byte(c.want)) {
				t.Errorf("answer %.400s, want it to hold %s", ans, c.want)
			}
			if len(ans) > 1024 {
				t.Errorf("an answer of %d bytes: %.300s", len(ans), ans)
			}
			if run := echoed(ans, big); run != "" {
				t.Errorf("the answer repeats the request (%q): %.400s", run, ans)
			}
		})
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("put ran %d times", n)
	}
}

// A go-sdk client gets the refusal of a long tool name as the call's
// error, and an unknown tool's error with the name elided; its session
// goes on.
func TestRefusalReachesAClient(t *testing.T) {
	srv, _ := testServer(t)
	url := startServer(t, srv, DefaultLimits())
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"tok-a"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for name, want := range map[string]string{
		strings.Repeat("n", 129): "invalid params: a name is longer than 128 bytes",
		"nope":                   `unknown tool "…"`,
	} {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), name) {
			t.Errorf("a call of a tool named %.20s…: %v, want an error saying %q", name, err, want)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get", Arguments: map[string]any{"id": "n1"}})
	if err != nil || res.IsError {
		t.Fatalf("a call after the refusals: %v %+v", err, res)
	}
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestElideText(t *testing.T) {
	for in, want := range map[string]string{
		`unknown tool "get_nots"`:      `unknown tool "…"`,
		`a "b\"c" d "e"`:               `a "…" d "…"`,
		`handling 'tools/call': "a\\"`: `handling 'tools/call': "…"`,
		`unclosed "abc`:                `unclosed "…"`,
		"no quotes":                    "no quotes",
		strings.Repeat("x", 300):       strings.Repeat("x", maxErrorText-len("…")) + "…",
		strings.Repeat("é", 200):       strings.Repeat("é", (maxErrorText-len("…"))/2) + "…",
		"":                             "",
	} {
		got := elideText(in)
		if got != want {
			t.Errorf("elideText(%.40q) = %.300q, want %.300q", in, got, want)
		}
		if len(got) > maxErrorText || !utf8.ValidString(got) {
			t.Errorf("elideText(%.40q): %d bytes, valid UTF-8 %v", in, len(got), utf8.ValidString(got))
		}
	}
}
