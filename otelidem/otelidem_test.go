package otelidem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// telemetryRig is a tracer and a meter provider that keep what they get
// in memory, and a logger that writes JSON records into a buffer.
type telemetryRig struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	logs   bytes.Buffer
	log    *slog.Logger
	tracer *Tracer
}

var update = flag.Bool("update", false, "rewrite testdata/telemetry.golden")

type Note struct {
	Text string `json:"text"`
}

type Added struct {
	ID string `json:"id"`
}

// guard is a Guard on a fresh memory store that reports to the rig.
func (r *telemetryRig) guard(opts idem.Options) *idem.Guard {
	opts.Logger, opts.Tracer = r.log, r.tracer
	return idem.New(memory.New(nil), &opts)
}

// serve registers h as tool name on a new server with g, and returns a
// function that calls it through an in-process session.
func serve[In, Out any](t *testing.T, g *idem.Guard, name string, h idem.HandlerFor[In, Out], opts ...idem.Option) func(args any, meta mcp.Meta) *mcp.CallToolResult {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: name}, g, h, opts...)
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(args any, meta mcp.Meta) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

func newTelemetryRig(t *testing.T) *telemetryRig {
	r := &telemetryRig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	// Times and durations vary from run to run: the golden file has neither.
	log := slog.New(slog.NewJSONHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey:
				return slog.Attr{}
			case "duration":
				return slog.String("duration", "D")
			}
			return a
		}}))
	r.log, r.tracer = log, NewTracer(&Options{TracerProvider: tp, MeterProvider: mp})
	return r
}

// metrics collects the rig's metrics: name, then the data points'
// attributes, then the value (a histogram's count).
func (r *telemetryRig) metrics(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != scopeName {
			t.Errorf("metrics of scope %q, want %q", sm.Scope.Name, scopeName)
		}
		for _, m := range sm.Metrics {
			points := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points[setString(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					points[setString(p.Attributes)] = int64(p.Count)
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
			got[m.Name] = points
		}
	}
	return got
}

func setString(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// render writes the spans, metrics and log records as the golden file
// holds them: sorted, without times, ids or durations.
func (r *telemetryRig) render(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# spans\n")
	for _, s := range r.spans.GetSpans() {
		fmt.Fprintf(&b, "%s kind=%s status=%s", s.Name, s.SpanKind, s.Status.Code)
		if s.Status.Description != "" {
			fmt.Fprintf(&b, " %q", s.Status.Description)
		}
		b.WriteString("\n")
		attrs := slices.Clone(s.Attributes)
		slices.SortFunc(attrs, func(a, b attribute.KeyValue) int { return strings.Compare(string(a.Key), string(b.Key)) })
		for _, kv := range attrs {
			v := kv.Value.Emit()
			if kv.Key == keySessionID {
				v = "S"
			}
			fmt.Fprintf(&b, "  %s=%s\n", kv.Key, v)
		}
	}
	b.WriteString("# metrics\n")
	m := r.metrics(t)
	for _, name := range slices.Sorted(mapKeys(m)) {
		for _, set := range slices.Sorted(mapKeys(m[name])) {
			fmt.Fprintf(&b, "%s %s %d\n", name, set, m[name][set])
		}
	}
	b.WriteString("# log records\n")
	b.WriteString(r.logs.String())
	return b.String()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from what the test read (run with -update to rewrite it); got:\n%s", path, got)
	}
}

// One first call, one replay and one refusal (key_reused) over an MCP
// session: a span each, the metrics of the three, and one log record each,
// none of which holds an argument value or the op id. The rendering is in
// testdata/telemetry.golden.
func TestTelemetryFirstReplayRefusal(t *testing.T) {
	ctx := context.Background()
	r := newTelemetryRig(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	runs := 0
	guard := r.guard(idem.Options{Scope: func(context.Context, *mcp.CallToolRequest) string { return "user-7" }})
	idem.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note."}, guard,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
			runs++
			if !trace.SpanFromContext(ctx).IsRecording() {
				t.Error("the handler's context holds no recording span")
			}
			return nil, Added{ID: "note-1"}, tx.Create(ctx, idem.Key{Collection: "notes", ID: "note-1"}, in)
		}, idem.RequireOpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const opID = "app-42-SECRET-OPID"
	for _, text := range []string{"SECRET-milk", "SECRET-milk", "SECRET-eggs"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"text": text, "op_id": opID}}); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want 1", runs)
	}

	spans := r.spans.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	hash := sha256.Sum256([]byte(opID))
	wantHash := hex.EncodeToString(hash[:8])
	for i, want := range []struct {
		outcome, code string
		status        codes.Code
	}{{"first", "", codes.Unset}, {"replay", "", codes.Unset}, {"refused", "key_reused", codes.Error}} {
		s := spans[i]
		attrs := attribute.NewSet(s.Attributes...)
		get := func(k attribute.Key) string { v, _ := attrs.Value(k); return v.Emit() }
		if s.Name != "tools/call add_note" || s.SpanKind != trace.SpanKindServer || s.Status.Code != want.status ||
			get(keyMethodName) != "tools/call" || get(keyToolName) != "add_note" ||
			get(keyOutcome) != want.outcome || get(keyReplayed) != fmt.Sprint(want.outcome == "replay") ||
			get(keyOpIDHash) != wantHash || get(keyProtocolVersion) == "" ||
			get(keyNetworkTransport) != semconv.NetworkTransportPipe.Value.AsString() {
			t.Errorf("span %d: %s %s %v %v, want %s", i, s.Name, s.SpanKind, s.Status, s.Attributes, want.outcome)
		}
		if want.code != "" && (get(keyCode) != want.code || get(keyErrorType) != toolError || s.Status.Description != want.code) {
			t.Errorf("span %d: code %q, error.type %q, status %q: want %s, tool_error", i, get(keyCode), get(keyErrorType), s.Status.Description, want.code)
		}
	}

	m := r.metrics(t)
	calls := m[metricCalls]
	for set, want := range map[string]int64{
		"{gen_ai.tool.name=add_note,idemkit.outcome=first}":                           1,
		"{gen_ai.tool.name=add_note,idemkit.outcome=replay}":                          1,
		"{gen_ai.tool.name=add_note,idemkit.code=key_reused,idemkit.outcome=refused}": 1,
	} {
		if calls[set] != want {
			t.Errorf("%s%s = %d, want %d (all: %v)", metricCalls, set, calls[set], want, calls)
		}
	}
	var n int64
	for _, c := range m[metricDuration] {
		n += c
	}
	if n != 3 {
		t.Errorf("%s counted %d calls, want 3: %v", metricDuration, n, m[metricDuration])
	}

	logs := r.logs.String()
	var levels []string
	for line := range strings.Lines(logs) {
		var rec struct{ Level, Outcome, Scope, OpIDHash string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Scope != "user-7" {
			t.Errorf("log record without the scope: %s", line)
		}
		levels = append(levels, rec.Level+" "+rec.Outcome)
	}
	if want := []string{"INFO first", "INFO replay", "WARN refused"}; !slices.Equal(levels, want) {
		t.Errorf("log records %q, want %q", levels, want)
	}
	if !strings.Contains(logs, `"op_id_hash":"`+wantHash+`"`) {
		t.Errorf("log records lack the op id's hash %s:\n%s", wantHash, logs)
	}
	out := r.render(t)
	if strings.Contains(out, "SECRET") {
		t.Errorf("telemetry carries an argument value or the op id:\n%s", out)
	}
	t.Logf("what the exporters and the logger got:\n%s", out)
	golden(t, "telemetry.golden", out)
}

// A handler's tool error (isError) and a call that waited for a concurrent
// one with the same op id until busy are errors to the span and counted by
// code; a transaction the store retried counts its retries.
func TestTelemetryToolErrorContention(t *testing.T) {
	r := newTelemetryRig(t)
	var attempts atomic.Int32
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	g := r.guard(idem.Options{BusyAfter: 10 * time.Millisecond})
	call := serve(t, g, "note", func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		switch in.Text {
		case "fail":
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil, nil
		case "conflict":
			if attempts.Add(1) == 1 {
				return nil, nil, idem.ErrConflict // the store retries the transaction
			}
		case "hold":
			entered <- struct{}{}
			<-hold
		}
		return nil, nil, nil
	}, idem.OpID())
	args := func(text, opID string) map[string]string { return map[string]string{"text": text, "op_id": opID} }
	call(args("fail", "op-fail"), nil)
	call(args("conflict", "op-conflict"), nil)
	held := make(chan *mcp.CallToolResult)
	go func() { held <- call(args("hold", "op-hold"), nil) }()
	<-entered
	// The first call holds op-hold until this one, which waits for it, is
	// refused: it cannot but wait.
	if res := call(args("hold", "op-hold"), nil); !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeBusy) {
		t.Fatalf("concurrent call: %+v, want busy", res)
	}
	close(hold)
	<-held

	m := r.metrics(t)
	for _, c := range []struct {
		metric, set string
		want        int64
	}{
		{metricCalls, "{gen_ai.tool.name=note,idemkit.code=not_saved,idemkit.outcome=refused}", 1},
		{metricCalls, "{gen_ai.tool.name=note,idemkit.code=busy,idemkit.outcome=refused}", 1},
		{metricCalls, "{gen_ai.tool.name=note,idemkit.outcome=first}", 2},
		{metricRetries, "{gen_ai.tool.name=note}", 1},
		{metricWaits, "{gen_ai.tool.name=note}", 1},
		{metricDuration, "{error.type=tool_error,gen_ai.operation.name=execute_tool,gen_ai.tool.name=note,idemkit.outcome=refused,mcp.method.name=tools/call,mcp.protocol.version=2026-07-28,network.transport=pipe}", 2},
	} {
		if got := m[c.metric][c.set]; got != c.want {
			t.Errorf("%s%s = %d, want %d (all: %v)", c.metric, c.set, got, c.want, m[c.metric])
		}
	}
	errs := 0
	for _, s := range r.spans.GetSpans() {
		if s.Status.Code == codes.Error {
			errs++
		}
	}
	if errs != 2 {
		t.Errorf("%d spans with status Error, want 2 (the tool error and busy)", errs)
	}
	if !strings.Contains(r.logs.String(), `"attempts":2`) || !strings.Contains(r.logs.String(), `"waited":true`) {
		t.Errorf("log records lack the retry or the wait:\n%s", r.logs.String())
	}
}

// The trace context of a client's span, as a client sends it.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	traceparent   = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// childOf fails unless span is a child of the span spanID of trace
// traceID.
func childOf(t *testing.T, span sdktrace.ReadOnlySpan, traceID, spanID string) {
	t.Helper()
	if got := span.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("span %q in trace %s, want %s", span.Name(), got, traceID)
	}
	if got := span.Parent().SpanID().String(); got != spanID || !span.Parent().IsRemote() {
		t.Errorf("span %q has parent %s (remote %v), want the client's %s", span.Name(), got, span.Parent().IsRemote(), spanID)
	}
}

// A client's trace context in _meta (traceparent, as the semantic
// conventions for MCP propagate it) parents the call's span, in a program
// that set no global propagator.
func TestTelemetryTraceContextFromMeta(t *testing.T) {
	if f := otel.GetTextMapPropagator().Fields(); len(f) != 0 {
		t.Fatalf("the global propagator reads %q: this test is for a program that set none", f)
	}
	r := newTelemetryRig(t)
	call := serve(t, r.guard(idem.Options{}), "note", func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	call(map[string]string{"text": "a"}, mcp.Meta{"traceparent": traceparent, "tracestate": "rojo=00f067aa0ba902b7"})
	spans := r.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	childOf(t, spans[0].Snapshot(), clientTraceID, clientSpanID)
	if got := spans[0].SpanContext.TraceState().String(); got != "rojo=00f067aa0ba902b7" {
		t.Errorf("trace state %q, want the client's", got)
	}
}

// headerTransport sets a header on every request it sends.
type headerTransport struct{ header http.Header }

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.header {
		req.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(req)
}

// serveHTTP is serve over streamable HTTP, from a client that sends header
// with every request.
func serveHTTP[In, Out any](t *testing.T, g *idem.Guard, name string, h idem.HandlerFor[In, Out], header http.Header) func(args any, meta mcp.Meta) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: name}, g, h)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: hs.URL, HTTPClient: &http.Client{Transport: headerTransport{header}}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(args any, meta mcp.Meta) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// Over HTTP, a client that sends its trace context only in the request's
// traceparent header (as HTTP instrumentation does) parents the call's
// span; one it sends in _meta comes first. The span and the duration
// metric say the call came over HTTP, and no other header is recorded.
func TestTelemetryTraceContextFromHeader(t *testing.T) {
	if f := otel.GetTextMapPropagator().Fields(); len(f) != 0 {
		t.Fatalf("the global propagator reads %q: this test is for a program that set none", f)
	}
	r := newTelemetryRig(t)
	call := serveHTTP(t, r.guard(idem.Options{}), "note", func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}, http.Header{"Traceparent": {traceparent}, "X-Secret": {"SECRET-header"}})
	call(map[string]string{"text": "a"}, nil)
	const metaTraceID, metaSpanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	call(map[string]string{"text": "b"}, mcp.Meta{"traceparent": "00-" + metaTraceID + "-" + metaSpanID + "-01"})
	spans := r.spans.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	childOf(t, spans[0].Snapshot(), clientTraceID, clientSpanID)
	childOf(t, spans[1].Snapshot(), metaTraceID, metaSpanID)
	attrs := attribute.NewSet(spans[0].Attributes...)
	for k, want := range map[attribute.Key]string{keyNetworkTransport: semconv.NetworkTransportTCP.Value.AsString(), keyNetworkProtocolName: "http"} {
		if v, _ := attrs.Value(k); v.Emit() != want {
			t.Errorf("span attribute %s = %q, want %q", k, v.Emit(), want)
		}
	}
	version, _ := attrs.Value(keyProtocolVersion)
	if version.Emit() == "" {
		t.Errorf("span without %s", keyProtocolVersion)
	}
	set := "{gen_ai.operation.name=execute_tool,gen_ai.tool.name=note,idemkit.outcome=first,mcp.method.name=tools/call,mcp.protocol.version=" +
		version.Emit() + ",network.protocol.name=http,network.transport=tcp}"
	if got := r.metrics(t)[metricDuration]; got[set] != 2 {
		t.Errorf("%s: %v, want 2 calls in %s", metricDuration, got, set)
	}
	if out := r.render(t); strings.Contains(out, "SECRET") {
		t.Errorf("telemetry carries a request header:\n%s", out)
	}
}

// A span in the call's context (the ambient one: of a middleware, or of
// HTTP instrumentation) does not take the place of the client's: the
// call's span is the child of the trace context in _meta, linked to the
// ambient span, as the semantic conventions for MCP advise. With no trace
// context in _meta, the ambient span is the parent.
func TestTelemetryMetaBeforeAmbientSpan(t *testing.T) {
	r := newTelemetryRig(t)
	ambient := sdktrace.NewTracerProvider().Tracer("ambient")
	var ambientSpans []trace.SpanContext
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctx, span := ambient.Start(ctx, method)
			defer span.End()
			if method == "tools/call" {
				ambientSpans = append(ambientSpans, span.SpanContext())
			}
			return next(ctx, method, req)
		}
	})
	idem.AddTool(srv, &mcp.Tool{Name: "note"}, r.guard(idem.Options{}), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	ctx := context.Background()
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, meta := range []mcp.Meta{{"traceparent": traceparent}, nil} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "note", Arguments: map[string]string{"text": "a"}, Meta: meta}); err != nil {
			t.Fatal(err)
		}
	}
	spans := r.spans.GetSpans()
	if len(spans) != 2 || len(ambientSpans) != 2 {
		t.Fatalf("%d spans and %d ambient ones, want 2 each", len(spans), len(ambientSpans))
	}
	childOf(t, spans[0].Snapshot(), clientTraceID, clientSpanID)
	if l := spans[0].Links; len(l) != 1 || !l[0].SpanContext.Equal(ambientSpans[0]) {
		t.Errorf("links %+v, want one to the ambient span %v", l, ambientSpans[0])
	}
	if p := spans[1].Parent; !p.Equal(ambientSpans[1]) || len(spans[1].Links) != 0 {
		t.Errorf("without _meta: parent %v and links %+v, want the ambient span %v and no link", p, spans[1].Links, ambientSpans[1])
	}
}

// A program that set a global propagator has it read _meta: here W3C
// trace context and baggage, which reaches the handler.
func TestTelemetryGlobalPropagator(t *testing.T) {
	if !inChild(t) {
		return
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	r := newTelemetryRig(t)
	var member string
	call := serve(t, r.guard(idem.Options{}), "note", func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		member = baggage.FromContext(ctx).Member("user").Value()
		return nil, nil, nil
	})
	call(map[string]string{"text": "a"}, mcp.Meta{"traceparent": traceparent, "baggage": "user=alice"})
	spans := r.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	childOf(t, spans[0].Snapshot(), clientTraceID, clientSpanID)
	if member != "alice" {
		t.Errorf("the handler's baggage has user=%q, want alice", member)
	}
}

// inChild reports whether t runs in a process of its own; if not, it runs
// t there and reports its result. A test that sets something global (the
// OpenTelemetry providers and propagator can be set only once) runs so:
//
//	if !inChild(t) {
//		return
//	}
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv("IDEMKIT_TELEMETRY_CHILD") == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "IDEMKIT_TELEMETRY_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return false
}

// The attribute keys idemkit writes out are the semantic conventions'.
func TestTelemetryKeysAreSemanticConventions(t *testing.T) {
	for _, c := range []struct{ ours, theirs attribute.Key }{
		{keyMethodName, semconv.McpMethodNameKey},
		{keySessionID, semconv.McpSessionIDKey},
		{keyProtocolVersion, semconv.McpProtocolVersionKey},
		{keyToolName, semconv.GenAIToolNameKey},
		{keyOperationName, semconv.GenAIOperationNameKey},
		{keyErrorType, semconv.ErrorTypeKey},
		{keyDBSystem, semconv.DBSystemNameKey},
		{keyNetworkTransport, semconv.NetworkTransportKey},
		{keyNetworkProtocolName, semconv.NetworkProtocolNameKey},
	} {
		if c.ours != c.theirs {
			t.Errorf("key %q, semantic conventions say %q", c.ours, c.theirs)
		}
	}
	if semconv.GenAIOperationNameExecuteTool.Value.AsString() != executeTool {
		t.Errorf("gen_ai.operation.name %q, semantic conventions say %q", executeTool, semconv.GenAIOperationNameExecuteTool.Value.AsString())
	}
}

// A Tracer made before the program sets the global tracer and meter
// providers reports to them once they are set, and records nothing
// before. It runs in a process of its own: the global providers can be set
// only once.
func TestTelemetryGlobalProviders(t *testing.T) {
	if !inChild(t) {
		return
	}
	ctx := context.Background()
	g := idem.New(memory.New(nil), &idem.Options{Tracer: NewTracer(nil)})
	h := serve(t, g, "note", func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	call := func() { h(map[string]string{"text": "a"}, nil) }
	call()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	call()
	if got := spans.GetSpans(); len(got) != 1 || got[0].Name != "tools/call note" {
		t.Errorf("spans %v, want one of the call after the provider was set", got)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) == 0 {
		t.Errorf("metrics %+v, want the call's", rm.ScopeMetrics)
	}
}

// A call of a tool a Guard guards (Guard.Middleware, for a server's own
// handlers) gets its span and its count too, first and replay alike.
func TestTelemetryGuardedCall(t *testing.T) {
	ctx := context.Background()
	r := newTelemetryRig(t)
	g := r.guard(idem.Options{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v1"}, nil)
	runs := 0
	mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, func(ctx context.Context, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
		runs++
		return nil, Added{ID: "issue-1"}, nil
	})
	srv.AddReceivingMiddleware(g.Middleware(idem.Tools{"create_issue": {idem.RecordKeys("text")}}))
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: map[string]any{"text": "SECRET-title"}}); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want 1", runs)
	}
	var outcomes []string
	for _, s := range r.spans.GetSpans() {
		attrs := attribute.NewSet(s.Attributes...)
		v, _ := attrs.Value(keyOutcome)
		if s.Name != "tools/call create_issue" {
			t.Errorf("span %q, want tools/call create_issue", s.Name)
		}
		outcomes = append(outcomes, v.Emit())
	}
	if !slices.Equal(outcomes, []string{"first", "replay"}) {
		t.Errorf("span outcomes %q, want first and replay", outcomes)
	}
	calls := r.metrics(t)[metricCalls]
	if calls["{gen_ai.tool.name=create_issue,idemkit.outcome=first}"] != 1 || calls["{gen_ai.tool.name=create_issue,idemkit.outcome=replay}"] != 1 {
		t.Errorf("%s: %v, want one first and one replay", metricCalls, calls)
	}
	if out := r.render(t); strings.Contains(out, "SECRET") {
		t.Errorf("telemetry carries an argument value:\n%s", out)
	}
}
