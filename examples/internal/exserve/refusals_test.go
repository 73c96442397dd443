package exserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// logBuffer is a log that tests read while the server writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns the log's lines that hold every one of parts.
func (b *logBuffer) records(parts ...string) []string {
	var out []string
	for line := range strings.Lines(b.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// waitRecords waits up to 5 s for the log to hold n lines with every one
// of parts.
func (b *logBuffer) waitRecords(t *testing.T, n int, parts ...string) {
	t.Helper()
	waitUntil(t, 5*time.Second, func() bool { return len(b.records(parts...)) >= n }, func() string {
		return fmt.Sprintf("%d records with %q after 5 s, want %d:\n%s", len(b.records(parts...)), parts, n, b)
	})
}

// refusalCounts reads the counter idemkit.http.refusals from r, as
// "status reason" -> count.
func refusalCounts(t *testing.T, r sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "idemkit.http.refusals" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				status, _ := p.Attributes.Value(attribute.Key("http.response.status_code"))
				reason, _ := p.Attributes.Value(attribute.Key("idemkit.reason"))
				out[fmt.Sprintf("%d %s", status.AsInt64(), reason.AsString())] += p.Value
			}
		}
	}
	return out
}

// Each kind of refusal, sent twice, is counted twice by status and reason
// and logged once, with its user and reason and nothing of the request.
func TestRefusalsLoggedAndCounted(t *testing.T) {
	srv, runs, h := holdingServer(t)
	lim := testLimits()
	lim.ReadTimeout = 300 * time.Millisecond
	var logs logBuffer
	reader := sdkmetric.NewManualReader()
	rf := testRefusals(slog.New(slog.NewTextHandler(&logs, nil)), sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	url, g := startServerWith(t, srv, lim, rf)
	const secret = "s3cr3t"
	long := secret + strings.Repeat("x", 200)
	expect := func(what string, status int, token, version, body string) {
		t.Helper()
		for range 2 {
			code, ans, err := post(testClient, url, token, version, body)
			if err != nil || code != status {
				t.Fatalf("%s: %d %v %.200s, want %d", what, code, err, ans, status)
			}
		}
	}
	expect("no token", http.StatusUnauthorized, "", "2025-06-18", call(1, "get", secret))
	expect("a body too large", http.StatusRequestEntityTooLarge, "tok-a", "2025-06-18", call(1, "put", secret+strings.Repeat("x", 8<<10)))
	expect("a batch too large", http.StatusBadRequest, "tok-a", "", batch(lim.MaxBatch+1, secret))
	expect("a method too long", http.StatusBadRequest, "tok-a", "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"`+long+`"}`)
	expect("a tool name too long", http.StatusBadRequest, "tok-b", "2025-06-18", call(1, long, "n1"))
	for range 2 {
		c := dialRaw(t, url)
		body := call(1, "put", secret)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-a\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", Path, len(body), body[:10])
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a stalled body: %v %v, want 408", resp, err)
		}
		resp.Body.Close()
	}
	// 429: a's calls at the limit and as many waiting.
	var wg sync.WaitGroup
	for i := range 2 * lim.MaxCallsPerUser {
		wg.Go(func() { post(testClient, url, "tok-a", "2025-06-18", call(1, "hold", fmt.Sprint("h", i))) })
	}
	waitUntil(t, 10*time.Second, func() bool {
		return h.entered.Load() >= int64(lim.MaxCallsPerUser) && g.waiting("a") >= lim.MaxCallsPerUser
	}, func() string {
		return fmt.Sprintf("%d of a's calls running and %d waiting after 10 s", h.entered.Load(), g.waiting("a"))
	})
	expect("a call beyond the waiting ones", http.StatusTooManyRequests, "tok-a", "2025-06-18", call(1, "get", secret))
	close(h.release)
	wg.Wait()
	if n := runs.Load(); n != 0 {
		t.Errorf("put ran %d times", n)
	}

	want := map[string]int64{
		"401 unauthorized":    2,
		"413 body_too_large":  2,
		"400 batch_too_large": 2,
		"400 method_too_long": 2,
		"400 name_too_long":   2,
		"408 timeout":         2,
		"429 too_many_calls":  2,
	}
	got := refusalCounts(t, reader)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("idemkit.http.refusals{%s} = %d, want %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("idemkit.http.refusals = %v, want %v", got, want)
	}
	log := logs.String()
	for k := range want {
		status, reason, _ := strings.Cut(k, " ")
		user := " user=a"
		switch reason {
		case reasonUnauthorized:
			user = ""
		case reasonNameTooLong:
			user = " user=b"
		}
		if recs := logs.records(`msg="request refused" reason=`+reason+" status="+status+user+"\n", "level=WARN"); len(recs) != 1 {
			t.Errorf("%d records of %s, want 1:\n%s", len(recs), k, log)
		}
	}
	if strings.Contains(log, secret) {
		t.Errorf("the log quotes a request:\n%s", log)
	}
}

// A burst of refusals of one reason and user makes one record at once and,
// at the end of the interval, one saying how many were not logged; another
// user's refusal is logged on its own. After a quiet interval the next
// refusal is logged at once.
func TestRefusalLogRateLimited(t *testing.T) {
	var logs logBuffer
	const interval = 300 * time.Millisecond
	rf := newRefusals(slog.New(slog.NewTextHandler(&logs, nil)), noop.NewMeterProvider(), interval)
	ctx := context.Background()
	start := time.Now()
	for range 100 {
		rf.record(ctx, "alice", http.StatusTooManyRequests, reasonTooManyCalls)
	}
	rf.record(ctx, "bob", http.StatusTooManyRequests, reasonTooManyCalls)
	if time.Since(start) > interval/2 {
		t.Skipf("the burst took %v, too long to test an interval of %v", time.Since(start), interval)
	}
	alice, bob := "reason=too_many_calls status=429 user=alice", "reason=too_many_calls status=429 user=bob"
	if n, m := len(logs.records(alice)), len(logs.records(bob)); n != 1 || m != 1 {
		t.Fatalf("a burst of 100 refusals of alice's and one of bob's: %d and %d records, want 1 and 1:\n%s", n, m, logs.String())
	}
	logs.waitRecords(t, 1, alice+" suppressed=99 within=300ms")
	// Two more intervals: the window closes, with nothing more to say.
	time.Sleep(2 * interval)
	open := func() int { rf.mu.Lock(); defer rf.mu.Unlock(); return len(rf.windows) }
	waitUntil(t, 5*time.Second, func() bool { return open() == 0 }, func() string {
		return fmt.Sprintf("%d windows still open 5 s after the last refusal", open())
	})
	if n, m := len(logs.records(alice)), len(logs.records(bob)); n != 2 || m != 1 {
		t.Fatalf("after the burst: %d and %d records, want 2 and 1:\n%s", n, m, logs.String())
	}
	rf.record(ctx, "alice", http.StatusTooManyRequests, reasonTooManyCalls)
	if n := len(logs.records(alice)); n != 3 {
		t.Fatalf("a refusal after a quiet interval: %d records, want 3:\n%s", n, logs.String())
	}
}

// A request whose client goes away while it waits for a slot is no
// refusal: nothing is counted or logged.
func TestClientGoneIsNoRefusal(t *testing.T) {
	srv, _, h := holdingServer(t)
	lim := testLimits()
	lim.MaxCallsPerUser = 1
	lim.MaxBatch = 1
	var logs logBuffer
	reader := sdkmetric.NewManualReader()
	rf := testRefusals(slog.New(slog.NewTextHandler(&logs, nil)), sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	url, g := startServerWith(t, srv, lim, rf)
	held := make(chan struct{})
	go func() {
		defer close(held)
		post(testClient, url, "tok-a", "2025-06-18", call(1, "hold", "h"))
	}()
	waitUntil(t, 5*time.Second, func() bool { return h.entered.Load() != 0 }, func() string {
		return "the held call did not start within 5 s"
	})
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(call(2, "get", "n1")))
		req.Header.Set("Authorization", "Bearer tok-a")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		_, err := testClient.Do(req)
		gone <- err
	}()
	waitUntil(t, 5*time.Second, func() bool { return g.waiting("a") != 0 }, func() string {
		return "the second call did not wait within 5 s"
	})
	cancel()
	<-gone
	waitUntil(t, 5*time.Second, func() bool { return g.waiting("a") == 0 }, func() string {
		return "the call of a gone client still waits after 5 s"
	})
	close(h.release)
	<-held
	time.Sleep(100 * time.Millisecond) // a refusal, were there one, is recorded by now
	if got := refusalCounts(t, reader); len(got) != 0 {
		t.Errorf("idemkit.http.refusals = %v, want nothing", got)
	}
	if logs.String() != "" {
		t.Errorf("log:\n%s", logs.String())
	}
}

// A refused request is answered after the pause, so that a client sending
// again at once cannot loop; a 408 is answered at once, its request's
// context having ended with the read timeout.
func TestRefusalPause(t *testing.T) {
	srv, _ := testServer(t)
	lim := testLimits()
	lim.ReadTimeout = 200 * time.Millisecond
	rf := testRefusals(discardLog(), noop.NewMeterProvider())
	rf.pause = 2 * time.Second
	url, _ := startServerWith(t, srv, lim, rf)
	start := time.Now()
	code, _, err := post(testClient, url, "", "2025-06-18", call(1, "get", "n1"))
	if took := time.Since(start); err != nil || code != http.StatusUnauthorized || took < rf.pause {
		t.Errorf("no token: %d %v after %v, want 401 after %v", code, err, took, rf.pause)
	}
	start = time.Now()
	code, _, err = post(testClient, url, "tok-a", "", batch(lim.MaxBatch+1, "b"))
	if took := time.Since(start); err != nil || code != http.StatusBadRequest || took < rf.pause {
		t.Errorf("a batch too large: %d %v after %v, want 400 after %v", code, err, took, rf.pause)
	}
	c := dialRaw(t, url)
	body := call(1, "put", "slow")
	start = time.Now()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-a\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", Path, len(body), body[:10])
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusRequestTimeout || took > rf.pause {
		t.Errorf("a stalled body: %d after %v, want 408 within %v", resp.StatusCode, took, rf.pause)
	}
}
