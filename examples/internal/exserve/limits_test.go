package exserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testLimits are DefaultLimits made small enough to reach in a test.
func testLimits() Limits {
	l := DefaultLimits()
	l.MaxBody = 4 << 10
	l.MaxBatch = 3
	l.MaxCallsPerUser = 3
	return l
}

// A body above MaxBody is answered 413 and nothing in it runs; the go-sdk's
// own limit (4 MiB) would let it through.
func TestBodyLimit(t *testing.T) {
	srv, runs := testServer(t)
	url := startServer(t, srv, testLimits())
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"id":"n1","text":%q}}}`, strings.Repeat("x", 8<<10))
	code, ans, err := post(testClient, url, "tok-a", "2025-06-18", big)
	if err != nil || code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of %d bytes: %d %v %.200s, want 413", len(big), code, err, ans)
	}
	if bytes.Contains(ans, []byte("xxxx")) {
		t.Errorf("the refusal repeats the body: %.200s", ans)
	}
	if code, _, err := post(testClient, url, "tok-a", "2025-06-18", call(1, "put", "n1")); err != nil || code != http.StatusOK {
		t.Fatalf("a small body: %d %v", code, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("put ran %d times, want 1 (the small call only)", n)
	}
}

// A batch (accepted by the go-sdk from a request without an
// MCP-Protocol-Version header) longer than MaxBatch is answered 400 and
// none of it runs; one of MaxBatch runs whole.
func TestBatchLimit(t *testing.T) {
	srv, runs := testServer(t)
	lim := testLimits()
	url := startServer(t, srv, lim)
	code, ans, err := post(testClient, url, "tok-a", "", batch(lim.MaxBatch+1, "over"))
	if err != nil || code != http.StatusBadRequest || !bytes.Contains(ans, []byte("-max-batch")) {
		t.Fatalf("a batch of %d: %d %v %.200s, want 400 naming -max-batch", lim.MaxBatch+1, code, err, ans)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("put ran %d times for a refused batch", n)
	}
	code, ans, err = post(testClient, url, "tok-a", "", batch(lim.MaxBatch, "ok"))
	if err != nil || code != http.StatusOK {
		t.Fatalf("a batch of %d: %d %v %.200s", lim.MaxBatch, code, err, ans)
	}
	if n := runs.Load(); n != int64(lim.MaxBatch) {
		t.Fatalf("put ran %d times for a batch of %d", n, lim.MaxBatch)
	}
}

// Without a batch limit, a batch larger than MaxCallsPerUser, which the
// per-user gate could never admit, is refused with 400, not a 429 that
// would be retried in vain.
func TestBatchAboveCallsPerUser(t *testing.T) {
	srv, runs := testServer(t)
	lim := testLimits()
	lim.MaxBatch = 0
	url := startServer(t, srv, lim)
	code, ans, err := post(testClient, url, "tok-a", "", batch(lim.MaxCallsPerUser+1, "over"))
	if err != nil || code != http.StatusBadRequest || !bytes.Contains(ans, []byte("-max-calls")) {
		t.Fatalf("a batch of %d: %d %v %.200s, want 400 naming -max-calls", lim.MaxCallsPerUser+1, code, err, ans)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("put ran %d times for a refused batch", n)
	}
}

// A batch larger than MaxCallsTotal, which the gate could never admit, is
// refused with 400 naming -max-calls-total, not left waiting.
func TestBatchAboveCallsTotal(t *testing.T) {
	srv, runs := testServer(t)
	lim := testLimits()
	lim.MaxBatch, lim.MaxCallsPerUser, lim.MaxCallsTotal = 0, 0, 3
	url := startServer(t, srv, lim)
	c := &http.Client{Timeout: 5 * time.Second}
	code, ans, err := post(c, url, "tok-a", "", batch(lim.MaxCallsTotal+1, "over"))
	if err != nil || code != http.StatusBadRequest || !bytes.Contains(ans, []byte("-max-calls-total")) {
		t.Fatalf("a batch of %d: %d %v %.200s, want 400 naming -max-calls-total", lim.MaxCallsTotal+1, code, err, ans)
	}
	if code, _, err := post(c, url, "tok-a", "", batch(lim.MaxCallsTotal, "ok")); err != nil || code != http.StatusOK {
		t.Fatalf("a batch of %d: %d %v", lim.MaxCallsTotal, code, err)
	}
	if n := runs.Load(); n != int64(lim.MaxCallsTotal) {
		t.Fatalf("put ran %d times, want %d", n, lim.MaxCallsTotal)
	}
}

// A user with MaxCallsPerUser calls in progress has as many more wait,
// and is refused one more with 429; another user's call goes through
// meanwhile, and every call that waited is answered once a slot is free.
func TestCallsPerUser(t *testing.T) {
	srv, _, h := holdingServer(t)
	lim := testLimits()
	url, g := startServerGate(t, srv, lim)
	var wg sync.WaitGroup
	answers := make(chan string, 2*lim.MaxCallsPerUser)
	send := func(tool, id string) {
		wg.Go(func() {
			code, ans, err := post(testClient, url, "tok-a", "2025-06-18", call(1, tool, id))
			answers <- fmt.Sprintf("%d %v %s", code, err, ans)
		})
	}
	for i := range lim.MaxCallsPerUser {
		send("hold", fmt.Sprint("h", i))
	}
	waitUntil(t, 10*time.Second, func() bool { return h.entered.Load() >= int64(lim.MaxCallsPerUser) }, func() string {
		return fmt.Sprintf("%d of a's calls running after 10 s, want %d", h.entered.Load(), lim.MaxCallsPerUser)
	})
	for i := range lim.MaxCallsPerUser {
		send("get", fmt.Sprint("w", i))
	}
	waitUntil(t, 10*time.Second, func() bool { return g.waiting("a") >= lim.MaxCallsPerUser }, func() string {
		return fmt.Sprintf("%d of a's calls wait for a slot after 10 s, want %d", g.waiting("a"), lim.MaxCallsPerUser)
	})
	// A client that gives up: were the call left waiting, the test would too.
	c := &http.Client{Timeout: 5 * time.Second}
	code, ans, err := post(c, url, "tok-a", "2025-06-18", call(2, "get", "n1"))
	if err != nil || code != http.StatusTooManyRequests || !bytes.Contains(ans, []byte("-max-calls")) {
		t.Errorf("a's call beyond %d running and %d waiting: %d %v %.300s, want 429 naming -max-calls", lim.MaxCallsPerUser, lim.MaxCallsPerUser, code, err, ans)
	}
	code, ans, err = post(c, url, "tok-b", "2025-06-18", call(2, "get", "n1"))
	if err != nil || code != http.StatusOK || bytes.Contains(ans, []byte(`"error"`)) {
		t.Errorf("b's call while a is at the limit: %d %v %.300s", code, err, ans)
	}
	close(h.release)
	wg.Wait()
	close(answers)
	for a := range answers {
		if !strings.HasPrefix(a, "200 <nil>") || strings.Contains(a, `"error"`) || strings.Contains(a, `"isError":true`) {
			t.Errorf("a's call that ran or waited: %.300s", a)
		}
	}
	// The last slots are released just after their answers are sent.
	users := func() int { g.mu.Lock(); defer g.mu.Unlock(); return len(g.users) }
	waitUntil(t, 5*time.Second, func() bool { return users() == 0 }, func() string {
		return fmt.Sprintf("%d users still counted after every call ended", users())
	})
}

// A request counts a call for each 64 KiB of its body: with a call of
// 200 KiB and a small one of a's held, a's -max-calls of 4 is reached and
// her next call waits, while b's runs.
func TestLargeBodyTakesMoreSlots(t *testing.T) {
	srv, _, h := holdingServer(t)
	lim := testLimits()
	lim.MaxBody, lim.MaxCallsPerUser = 1<<20, 4
	url, g := startServerGate(t, srv, lim)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(h.release)
	large := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{"id":"large","text":%q}}}`, strings.Repeat("x", 200<<10))
	for _, body := range []string{large, call(1, "hold", "small")} {
		wg.Go(func() { post(testClient, url, "tok-a", "2025-06-18", body) })
	}
	waitUntil(t, 10*time.Second, func() bool { return h.entered.Load() >= 2 }, func() string {
		return fmt.Sprintf("%d of a's held calls started after 10 s, want 2", h.entered.Load())
	})
	if n := g.runningOf("a"); n != 4 {
		t.Fatalf("a's calls hold %d slots, want 4 (3 for 200 KiB, 1 for the small one)", n)
	}
	wg.Go(func() { post(testClient, url, "tok-a", "2025-06-18", call(2, "get", "n1")) })
	waitUntil(t, 10*time.Second, func() bool { return g.waiting("a") != 0 }, func() string {
		return "a's third call did not wait within 10 s"
	})
	if code, ans, err := post(testClient, url, "tok-b", "2025-06-18", call(2, "get", "n1")); err != nil || code != http.StatusOK {
		t.Fatalf("b's call: %d %v %.200s", code, err, ans)
	}
}

// dialRaw opens a plain TCP connection to the server of url, so a test can
// send a request as slowly as it likes.
func dialRaw(t *testing.T, url string) net.Conn {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), Path)
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Longer than any limit the tests set: a server without the limit
	// leaves the test waiting this long, and it fails.
	c.SetDeadline(time.Now().Add(15 * time.Second))
	return c
}

// A body trickled slower than ReadTimeout is answered 408 and does not run.
func TestSlowBodyTimesOut(t *testing.T) {
	srv, runs := testServer(t)
	lim := testLimits()
	lim.ReadTimeout = 300 * time.Millisecond
	url := startServer(t, srv, lim)
	c := dialRaw(t, url)
	body := call(1, "put", "slow")
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-a\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", Path, len(body), body[:10])
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a stalled body: %d, want 408", resp.StatusCode)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("put ran %d times", n)
	}
}

// A call that runs longer than ReadTimeout is answered: the timeout covers
// reading the request, not the call (net/http lifts the connection's read
// deadline once the body is read; were it kept, its expiry would cancel
// the request's context).
func TestLongCallOutlivesReadTimeout(t *testing.T) {
	srv, _, h := holdingServer(t)
	lim := testLimits()
	lim.ReadTimeout = 200 * time.Millisecond
	url := startServer(t, srv, lim)
	h.releaseAfter(4 * lim.ReadTimeout)
	code, ans, err := post(testClient, url, "tok-a", "2025-06-18", call(1, "hold", "long"))
	if err != nil || code != http.StatusOK || !bytes.Contains(ans, []byte(`"long"`)) {
		t.Fatalf("a call of 4 read timeouts: %d %v %.300s", code, err, ans)
	}
}

// An answer not written within WriteTimeout of the request's headers is
// cut off: the connection closes without it.
func TestWriteTimeoutCutsAnswer(t *testing.T) {
	srv, _, h := holdingServer(t)
	lim := testLimits()
	lim.WriteTimeout = 300 * time.Millisecond
	url := startServer(t, srv, lim)
	h.releaseAfter(4 * lim.WriteTimeout)
	_, ans, err := post(testClient, url, "tok-a", "2025-06-18", call(1, "hold", "late"))
	if err == nil && bytes.Contains(ans, []byte(`"late"`)) {
		t.Fatalf("an answer 4 write timeouts late arrived: %.300s", ans)
	}
}

// A kept-alive connection that sends nothing for IdleTimeout is closed.
func TestIdleConnectionCloses(t *testing.T) {
	srv, _ := testServer(t)
	lim := testLimits()
	lim.IdleTimeout = 200 * time.Millisecond
	url := startServer(t, srv, lim)
	c := dialRaw(t, url)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection: %v, want it closed (EOF)", err)
	}
}

// A subscriptions/listen stream (protocol 2026-07-28: Claude Code opens one
// per session) outlives the write timeout and holds none of its user's
// call slots: the user's calls go on while it is open.
func TestListenStreamOutlivesLimits(t *testing.T) {
	srv, runs := testServer(t)
	lim := testLimits()
	lim.MaxCallsPerUser = 1
	lim.WriteTimeout = 300 * time.Millisecond
	url := startServer(t, srv, lim)
	const modern = "2026-07-28"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modern + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}}`
	send := func(method, body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer tok-a")
		req.Header.Set("MCP-Protocol-Version", modern)
		req.Header.Set("Mcp-Method", method)
		if method == "tools/call" {
			req.Header.Set("Mcp-Name", "put")
		}
		c := http.DefaultClient
		if method != "subscriptions/listen" {
			c = &http.Client{Timeout: 5 * time.Second}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return resp
	}
	resp := send("subscriptions/listen", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+meta+`}}`)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("subscriptions/listen: %s %s", resp.Status, b)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// A notification sent after three write timeouts still arrives.
	time.Sleep(3 * lim.WriteTimeout)
	srv.AddTool(&mcp.Tool{Name: "later", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	deadline := time.After(5 * time.Second)
	for changed := false; !changed; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the listen stream ended: the write timeout cut it")
			}
			changed = strings.Contains(l, "notifications/tools/list_changed")
		case <-deadline:
			t.Fatalf("no notifications/tools/list_changed on the listen stream within 5 s")
		}
	}
	put := send("tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"put","arguments":{"id":"n1","text":"x"},`+meta+`}}`)
	ans, err := io.ReadAll(put.Body)
	put.Body.Close()
	if err != nil || put.StatusCode != http.StatusOK || runs.Load() != 1 {
		t.Fatalf("a call of the listening user: %s %v %.300s (runs %d), want it answered", put.Status, err, ans, runs.Load())
	}
}
