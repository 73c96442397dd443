package exserve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// Note is the record the test server's tools write and read.
type Note struct {
	ID   string `json:"id"`
	Text string `json:"text,omitempty"`
}

// testServer is a server on SQLite with a keyed write (put) and a read
// (get), the shape of the examples' tools; runs counts put's handler runs.
func testServer(t testing.TB) (*mcp.Server, *atomic.Int64) {
	srv, runs, _ := holdingServer(t)
	return srv, runs
}

// holding lets a test hold calls of the tool hold: each counts itself in
// entered and waits for release to be closed.
type holding struct {
	entered atomic.Int64
	release chan struct{}
}

// releaseAfter releases the held calls d after the first one entered.
func (h *holding) releaseAfter(d time.Duration) {
	go func() {
		for h.entered.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(d)
		close(h.release)
	}()
}

// holdingServer is testServer with the tool hold as well.
func holdingServer(t testing.TB) (*mcp.Server, *atomic.Int64, *holding) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runs := new(atomic.Int64)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "put", Description: "Write a note."}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Note, error) {
			runs.Add(1)
			return nil, in, tx.Put(ctx, idem.Key{Collection: "notes", ID: in.ID}, in)
		}, idem.RecordKeys("id"))
	idem.AddTool(srv, &mcp.Tool{Name: "get", Description: "Read a note.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Note, error) {
			var n Note
			_, err := tx.Get(ctx, idem.Key{Collection: "notes", ID: in.ID}, &n)
			if err != nil && err != idem.ErrNotFound {
				return nil, Note{}, err
			}
			return nil, n, nil
		})
	h := &holding{release: make(chan struct{})}
	mcp.AddTool(srv, &mcp.Tool{Name: "hold", Description: "Wait until the test says so."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Note, error) {
			h.entered.Add(1)
			select {
			case <-h.release:
			case <-ctx.Done():
			}
			return nil, in, nil
		})
	return srv, runs, h
}

// discardLog is a logger that writes nothing.
func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// call is the JSON-RPC text of one tools/call.
func call(id int, tool, noteID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"id":%q,"text":"flood"}}}`, id, tool, noteID)
}

// batch is the JSON-RPC text of n put calls in one batch.
func batch(n int, prefix string) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = call(i+1, "put", fmt.Sprintf("%s-%d", prefix, i))
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// post sends body to url as token's user the way a streamable HTTP client
// does; version is the MCP-Protocol-Version header ("" sends none). It
// returns the status and the whole answer.
func post(c *http.Client, url, token, version, body string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// startServer serves srv over a loopback listener with users a and b, as
// Run does with lim, and returns the endpoint URL.
func startServer(t testing.TB, srv *mcp.Server, lim Limits) string {
	url, _ := startServerGate(t, srv, lim)
	return url
}

// startServerGate is startServer, returning the gate of the users' calls
// too.
func startServerGate(t testing.TB, srv *mcp.Server, lim Limits) (string, *gate) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, g := lim.handler(srv, Users{"tok-a": "a", "tok-b": "b"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lim.Serve(ctx, func() {}, discardLog(), h, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return EndpointURL(ln.Addr()), g
}

// BenchmarkFlood times user b's reads, one at a time, while user a floods
// the server: with batches of 2,000 writes sent without an
// MCP-Protocol-Version header (which the go-sdk then accepts as a batch),
// or with 64 clients sending single writes as fast as they are answered.
// Each runs with the limits off (the server as it was) and with
// DefaultLimits. It reports b's p50, p99 and slowest read in ms, and the
// writes a got committed per second. Keep it short:
//
//	go test -run '^$' -bench Flood -benchtime 60x ./examples/internal/exserve
func BenchmarkFlood(b *testing.B) {
	for _, flood := range []string{"batch", "concurrent"} {
		for _, lim := range []struct {
			name string
			lim  Limits
		}{{"off", Limits{}}, {"default", DefaultLimits()}} {
			b.Run(flood+"/limits="+lim.name, func(b *testing.B) {
				srv, runs := testServer(b)
				url := startServer(b, srv, lim.lim)
				c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
				if code, _, err := post(c, url, "tok-b", "2025-06-18", call(1, "put", "b-note")); err != nil || code != http.StatusOK {
					b.Fatalf("b's first write: %d %v", code, err)
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				workers, body := 64, func(w, i int) string { return call(1, "put", fmt.Sprintf("a-%d-%d", w, i)) }
				version := "2025-06-18"
				if flood == "batch" {
					workers, version = 2, ""
					body = func(w, i int) string { return batch(2000, fmt.Sprintf("a-%d-%d", w, i)) }
				}
				for w := range workers {
					wg.Go(func() {
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							if _, _, err := post(c, url, "tok-a", version, body(w, i)); err != nil {
								return
							}
						}
					})
				}
				time.Sleep(200 * time.Millisecond) // the flood is under way
				before := runs.Load()
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					t0 := time.Now()
					code, ans, err := post(c, url, "tok-b", "2025-06-18", call(2, "get", "b-note"))
					if err != nil || code != http.StatusOK || !bytes.Contains(ans, []byte(`"b-note"`)) {
						b.Fatalf("b's read: %d %v %.200s", code, err, ans)
					}
					lat = append(lat, time.Since(t0))
				}
				elapsed := time.Since(start)
				b.StopTimer()
				writes := runs.Load() - before
				close(stop)
				wg.Wait()
				slices.Sort(lat)
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
				b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
				b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
				b.ReportMetric(float64(writes)/elapsed.Seconds(), "a-writes/s")
			})
		}
	}
}
