package exserve

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/otelidem"
	"github.com/idemkit/sdk/store/memory"
)

// With Telemetry on, a tool call's span is logged when it ends, and the
// metrics when stopped.
func TestTelemetryLogsSpansAndMetrics(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	stop := Telemetry(slog.New(slog.NewTextHandler(&buf, nil)), 0)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	guard := idem.New(memory.New(nil), &idem.Options{Tracer: otelidem.NewTracer(nil)})
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, guard, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}, idem.RequireOpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "x", "op_id": "op-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(buf.String(), `msg=span name="tools/call add"`) {
		t.Errorf("no span record before stop:\n%s", buf.String())
	}
	if err := stop(ctx); err != nil {
		t.Fatal(err)
	}
	logs := buf.String()
	for _, want := range []string{
		"attrs.idemkit.outcome=replay",
		"msg=metric name=idemkit.calls attrs.gen_ai.tool.name=add attrs.idemkit.outcome=first value=1",
		"msg=metric name=mcp.server.operation.duration",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	t.Logf("\n%s", logs)
}

// With Telemetry on, a call's span joins the trace of a client that sends
// traceparent in _meta, and what its handler sends on (injected with the
// global propagator, as HTTP instrumentation does) carries that trace.
func TestTelemetryJoinsTheClientsTrace(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	stop := Telemetry(slog.New(slog.NewTextHandler(&buf, nil)), 0)
	defer stop(ctx)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	var sent http.Header
	guard := idem.New(memory.New(nil), &idem.Options{Tracer: otelidem.NewTracer(nil)})
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, guard, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		sent = http.Header{}
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(sent))
		return nil, nil, nil
	})
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "x"},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01"}}); err != nil {
		t.Fatal(err)
	}
	if want := "trace_id=" + traceID + " span_id="; !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), "parent_span_id="+spanID) {
		t.Errorf("the call's span is not the client's span's child (%s..., parent_span_id=%s):\n%s", want, spanID, buf.String())
	}
	if got := sent.Get("Traceparent"); !strings.HasPrefix(got, "00-"+traceID+"-") {
		t.Errorf("the handler sends on traceparent %q, want one in trace %s", got, traceID)
	}
}
