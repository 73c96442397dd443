package exserve

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
