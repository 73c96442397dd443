package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestServerDiscoverAnswer checks, byte by byte rather than through a
// client library that may forgive, what the stateless examples answer to
// the opening Claude Code sends them on protocol 2026-07-28: server/discover
// (no initialize), then a subscriptions/listen stream held open while other
// requests are answered. This is a small raw HTTP client written from the
// exchange the 2026-07-28 revision defines (and the go-sdk v1.8.0 and the
// TypeScript v2 client implement); TestModernProtocol drives the same
// servers with real clients.
func TestServerDiscoverAnswer(t *testing.T) {
	for _, c := range modernCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := startHTTP(t, c.bin(), c.args(t)...)
			ctx := testContext(t)

			var disc struct {
				ResultType        string         `json:"resultType"`
				SupportedVersions []string       `json:"supportedVersions"`
				Capabilities      map[string]any `json:"capabilities"`
				TTLMs             *int           `json:"ttlMs"`
				CacheScope        string         `json:"cacheScope"`
				Meta              map[string]any `json:"_meta"`
			}
			rawCall(t, ctx, url, 1, "server/discover", nil, &disc)
			if !slices.Contains(disc.SupportedVersions, modern) {
				t.Errorf("supportedVersions %v, want %s among them", disc.SupportedVersions, modern)
			}
			if disc.ResultType != "complete" {
				t.Errorf("resultType %q, want complete", disc.ResultType)
			}
			if mapAt(disc.Capabilities, "tools") == nil {
				t.Errorf("capabilities %v: no tools", disc.Capabilities)
			}
			if disc.TTLMs == nil || *disc.TTLMs < 0 || (disc.CacheScope != "public" && disc.CacheScope != "private") {
				t.Errorf("ttlMs %v, cacheScope %q: want an integer >= 0 and public or private", disc.TTLMs, disc.CacheScope)
			}
			if name, _ := mapAt(disc.Meta, "io.modelcontextprotocol/serverInfo")["name"].(string); name == "" {
				t.Errorf("_meta %v: no io.modelcontextprotocol/serverInfo name", disc.Meta)
			}

			// subscriptions/listen: acknowledged, and held open while a
			// tools/list is answered.
			lctx, stop := context.WithCancel(ctx)
			defer stop()
			res := rawPost(t, lctx, url, 2, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
			defer res.Body.Close()
			msg := nextMessage(t, bufio.NewReader(res.Body), res.Header.Get("Content-Type"))
			var ack struct {
				Method string `json:"method"`
				Params struct {
					Notifications map[string]any `json:"notifications"`
				} `json:"params"`
			}
			if err := json.Unmarshal(msg, &ack); err != nil || ack.Method != "notifications/subscriptions/acknowledged" || ack.Params.Notifications["toolsListChanged"] != true {
				t.Fatalf("subscriptions/listen: first message %s, want notifications/subscriptions/acknowledged with toolsListChanged", msg)
			}
			var tools struct {
				Tools []map[string]any `json:"tools"`
			}
			rawCall(t, ctx, url, 3, "tools/list", nil, &tools)
			listsTools(t, outcome{Tools: tools.Tools}, c.write.Name, "get_operation")
		})
	}
}

// rawPost sends one JSON-RPC request with rawRequest, failing t unless it
// is answered 200.
func rawPost(t *testing.T, ctx context.Context, url string, id int, method string, params map[string]any) *http.Response {
	t.Helper()
	res, err := http.DefaultClient.Do(rawRequest(t, ctx, url, id, method, params))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("%s: HTTP %s: %s", method, res.Status, b)
	}
	return res
}

// rawRequest is one JSON-RPC request at protocol 2026-07-28 the way the
// revision asks: the version, capabilities and client identity in _meta,
// the Mcp-Protocol-Version and Mcp-Method headers (and Mcp-Name for a
// tools/call), no session. A _meta in params joins the protocol's.
func rawRequest(t *testing.T, ctx context.Context, url string, id int, method string, params map[string]any) *http.Request {
	t.Helper()
	p := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modern,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "idemkit-interop-raw", "version": "0.0.0"},
	}}
	for k, v := range params {
		if own, ok := v.(map[string]any); ok && k == "_meta" {
			maps.Copy(p["_meta"].(map[string]any), own) // beside the protocol's
			continue
		}
		p[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", modern)
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok && method == "tools/call" {
		req.Header.Set("Mcp-Name", name)
	}
	return req
}

// rawCall sends a request with rawPost and decodes its result into out,
// failing t on a JSON-RPC error.
func rawCall(t *testing.T, ctx context.Context, url string, id int, method string, params map[string]any, out any) {
	t.Helper()
	res := rawPost(t, ctx, url, id, method, params)
	defer res.Body.Close()
	msg := nextMessage(t, bufio.NewReader(res.Body), res.Header.Get("Content-Type"))
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  any             `json:"error"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil || resp.Error != nil || resp.Result == nil {
		t.Fatalf("%s: answered %s, want a result", method, msg)
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		t.Fatalf("%s: %v: %s", method, err, resp.Result)
	}
}

// nextMessage returns the next JSON-RPC message of a response: its whole
// body when it is JSON, the data of its next event when it is an event
// stream.
func nextMessage(t *testing.T, r *bufio.Reader, contentType string) []byte {
	t.Helper()
	if strings.HasPrefix(contentType, "application/json") {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var data []byte
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " ")...)
		}
		if line == "" && len(data) > 0 {
			return data
		}
		if err != nil {
			t.Fatalf("the event stream ended before a message: %v", err)
		}
	}
}
