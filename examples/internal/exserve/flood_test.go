package exserve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	"github.com/idemkit/sdk/internal/storeurl/storeurltest"
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
	return holdingServerOn(freshSQLite(t))
}

// freshSQLite is a new SQLite store in t's temporary directory, closed
// when t ends.
func freshSQLite(t testing.TB) idem.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postgresNeeds is what store=postgres needs, for the message of its skip.
const postgresNeeds = "PostgreSQL runs with -tags postgres and IDEMKIT_POSTGRES_URL set, as in: ./scripts/with-postgres.sh go test -tags postgres -run '^$' -bench Flood ./examples/internal/exserve"

// postgresReady reports whether this build links PostgreSQL and
// IDEMKIT_POSTGRES_URL names a server.
func postgresReady() bool {
	return storekind.Linked("postgres") && os.Getenv("IDEMKIT_POSTGRES_URL") != ""
}

// freshPostgres is a new PostgreSQL store, opened the way -store
// postgres://... opens one (pgxpool's default pool), in tables no other
// store of this test run shares, closed when t ends. It skips t unless
// this build links PostgreSQL and IDEMKIT_POSTGRES_URL names a server.
func freshPostgres(t testing.TB) idem.Store {
	t.Helper()
	if !postgresReady() {
		t.Skip(postgresNeeds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, closeStore, err := storekind.Open(ctx, storeurltest.Fresh(t, "postgres"), storekind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return s
}

// holdingServerOn is holdingServer on the store s.
func holdingServerOn(s idem.Store) (*mcp.Server, *atomic.Int64, *holding) {
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

// testClient is the tests' HTTP client: a request left unanswered fails
// its test instead of holding it.
var testClient = &http.Client{Timeout: 30 * time.Second}

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
	return startServerWith(t, srv, lim, testRefusals(discardLog(), noop.NewMeterProvider()))
}

// testRefusals are the refusals of a test server: logged on log, counted
// on mp, answered at once.
func testRefusals(log *slog.Logger, mp metric.MeterProvider) *refusals {
	rf := newRefusals(log, mp, RefusalLogInterval)
	rf.pause = 0
	return rf
}

// startServerWith is startServerGate, refusing through rf.
func startServerWith(t testing.TB, srv *mcp.Server, lim Limits, rf *refusals) (string, *gate) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, g := lim.endpoint(goSDKHandler(srv), Users{"tok-a": "a", "tok-b": "b"}, rf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lim.Serve(ctx, func() {}, discardLog(), h, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return EndpointURL(ln.Addr()), g
}

// A flood is what user a sends, from many clients at once, while user b
// calls: workers loops, each sending body(worker, i) as its i-th request.
type flood struct {
	name    string
	workers int
	version string // the MCP-Protocol-Version header; "" lets a batch through
	body    func(w, i int) string
}

// floods are the ones BenchmarkFlood plays. Batches of 8 are the most
// -max-batch allows; the bodies of 0.99 MB and the 1 MB arguments are just
// under -max-body, the 2 MB bodies above it.
func floods() []flood {
	arg := func(n int) string { return strings.Repeat("x", n) }
	mb := arg(1_000_000)
	bigBatch := func(prefix string) string {
		calls := make([]string, 8)
		for i := range calls {
			calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"put","arguments":{"id":"%s-%d","text":%q}}}`,
				i+1, prefix, i, arg(990_000/8-120))
		}
		return "[" + strings.Join(calls, ",") + "]"
	}
	return []flood{
		{"batches-of-8", 16, "", func(w, i int) string { return batch(8, fmt.Sprintf("a-%d-%d", w, i)) }},
		{"parallel-64", 64, "2025-06-18", func(w, i int) string { return call(1, "put", fmt.Sprintf("a-%d-%d", w, i)) }},
		{"batches-0.99MB", 16, "", func(w, i int) string { return bigBatch(fmt.Sprintf("a-%d-%d", w, i)) }},
		{"bodies-2MB", 16, "2025-06-18", func(w, i int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"id":"a-%d-%d","text":"%s%s"}}}`, w, i, mb, mb)
		}},
		{"args-1MB", 16, "2025-06-18", func(w, i int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"id":"a-%d-%d","text":"%s"}}}`, w, i, mb)
		}},
	}
}

// floodStores are the stores BenchmarkFlood runs its server on, each
// opening a fresh one: SQLite, and PostgreSQL where it can (freshPostgres).
var floodStores = []struct {
	name string
	open func(testing.TB) idem.Store
}{{"sqlite", freshSQLite}, {"postgres", freshPostgres}}

// BenchmarkFlood times user b's calls, one at a time, a read (get) and a
// write (put) in turn, first alone and then while user a floods the
// server (see floods), on each of floodStores: with the limits off, with
// the per-user limits alone and refusals answered at once ("per-user"),
// and with DefaultLimits and RefusalPause. It reports b's p50 and p99
// under the flood as multiples of his p50 and p99 alone, for each tool,
// his p99 alone in ms, the time of one of a's requests alone in ms, and
// the calls of a's that ran each second. b.N is the number of b's calls
// of each tool, alone and under the flood. Each sub-benchmark has a store
// of its own. PostgreSQL is skipped unless the test binary is built with
// -tags postgres and IDEMKIT_POSTGRES_URL is set; its pool is pgxpool's
// default, or what pool_max_conns in that URL says:
//
//	go test -run '^$' -bench Flood -benchtime 200x ./examples/internal/exserve
//	./scripts/with-postgres.sh go test -tags postgres -run '^$' -bench Flood -benchtime 200x ./examples/internal/exserve
func BenchmarkFlood(b *testing.B) {
	perUser := DefaultLimits()
	perUser.MaxCallsTotal = 0
	for _, st := range floodStores {
		b.Run("store="+st.name, func(b *testing.B) {
			if st.name == "postgres" && !postgresReady() { // skipped once, not in each of its sub-benchmarks
				b.Skip(postgresNeeds)
			}
			for _, fl := range floods() {
				for _, c := range []struct {
					name  string
					lim   Limits
					pause time.Duration
				}{{"off", Limits{}, 0}, {"per-user", perUser, 0}, {"default", DefaultLimits(), RefusalPause}} {
					b.Run(fl.name+"/limits="+c.name, func(b *testing.B) {
						rf := testRefusals(discardLog(), noop.NewMeterProvider())
						rf.pause = c.pause
						benchFlood(b, st.open(b), fl, c.lim, rf)
					})
				}
			}
		})
	}
}

// benchFlood plays fl against b's calls on a server on s with lim,
// refusing through rf.
func benchFlood(b *testing.B, s idem.Store, fl flood, lim Limits, rf *refusals) {
	srv, runs, _ := holdingServerOn(s)
	url, _ := startServerWith(b, srv, lim, rf)
	// b's own connection, as another client's would be.
	bc := &http.Client{Transport: &http.Transport{}}
	ac := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	if code, _, err := post(bc, url, "tok-b", "2025-06-18", call(1, "put", "b-note")); err != nil || code != http.StatusOK {
		b.Fatalf("b's first write: %d %v", code, err)
	}
	writes := 0
	measure := func() (reads, puts []time.Duration) {
		for range b.N {
			for _, tool := range []string{"get", "put"} {
				id := "b-note"
				if tool == "put" {
					writes++
					id = fmt.Sprint("b-", writes)
				}
				t0 := time.Now()
				code, ans, err := post(bc, url, "tok-b", "2025-06-18", call(2, tool, id))
				d := time.Since(t0)
				if err != nil || code != http.StatusOK || !bytes.Contains(ans, []byte(`"`+id+`"`)) {
					b.Fatalf("b's %s: %d %v %.200s", tool, code, err, ans)
				}
				if tool == "get" {
					reads = append(reads, d)
				} else {
					puts = append(puts, d)
				}
			}
		}
		return reads, puts
	}
	measure() // warm up
	restReads, restPuts := measure()
	// One of a's requests alone, the yardstick of a flood of large calls:
	// the median of five, from a worker number no flood worker has.
	var alone []time.Duration
	for i := range 5 {
		t0 := time.Now()
		if _, _, err := post(ac, url, "tok-a", fl.version, fl.body(fl.workers, i)); err != nil {
			b.Fatalf("a's request alone: %v", err)
		}
		alone = append(alone, time.Since(t0))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range fl.workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				post(ac, url, "tok-a", fl.version, fl.body(w, i))
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the flood is under way
	before := runs.Load()
	b.ResetTimer()
	start := time.Now()
	reads, puts := measure()
	elapsed := time.Since(start)
	b.StopTimer()
	ran := runs.Load() - before - int64(b.N)
	close(stop)
	wg.Wait()

	pct := func(lat []time.Duration, p int) float64 {
		slices.Sort(lat)
		return float64(lat[(len(lat)-1)*p/100])
	}
	b.ReportMetric(pct(reads, 50)/pct(restReads, 50), "read-p50-x")
	b.ReportMetric(pct(reads, 99)/pct(restReads, 99), "read-p99-x")
	b.ReportMetric(pct(puts, 50)/pct(restPuts, 50), "write-p50-x")
	b.ReportMetric(pct(puts, 99)/pct(restPuts, 99), "write-p99-x")
	b.ReportMetric(pct(restReads, 99)/float64(time.Millisecond), "rest-read-p99-ms")
	b.ReportMetric(pct(restPuts, 99)/float64(time.Millisecond), "rest-write-p99-ms")
	b.ReportMetric(pct(alone, 50)/float64(time.Millisecond), "a-alone-ms")
	b.ReportMetric(float64(ran)/elapsed.Seconds(), "a-calls/s")
}
