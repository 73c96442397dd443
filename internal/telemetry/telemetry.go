// Package telemetry holds the names idemkit's OpenTelemetry spans and
// metrics use, and the sweep counters a store's sweeper feeds. The
// middleware's own instruments are in idem (telemetry.go); docs/observability.md
// lists them all.
package telemetry

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of every tracer and meter idemkit
// gets from a provider.
const ScopeName = "github.com/idemkit/sdk"

// Attribute keys. The first ones are the OpenTelemetry semantic conventions
// for MCP (semconv v1.41.0, where the conventions were last in the Go
// module; they now live in the GenAI conventions); the idemkit.* ones are
// idemkit's own.
const (
	MethodName      = attribute.Key("mcp.method.name")
	SessionID       = attribute.Key("mcp.session.id")
	ProtocolVersion = attribute.Key("mcp.protocol.version")
	ToolName        = attribute.Key("gen_ai.tool.name")
	OperationName   = attribute.Key("gen_ai.operation.name")
	ErrorType       = attribute.Key("error.type")
	DBSystem        = attribute.Key("db.system.name")

	Outcome  = attribute.Key("idemkit.outcome")
	Code     = attribute.Key("idemkit.code")
	Replayed = attribute.Key("idemkit.replayed")
	OpIDHash = attribute.Key("idemkit.op_id.hash")
	Attempts = attribute.Key("idemkit.attempts")
	Waited   = attribute.Key("idemkit.waited")
)

// Values of the semantic conventions' attributes.
const (
	MethodToolsCall = "tools/call"
	ExecuteTool     = "execute_tool"
	// ToolError is error.type for a tools/call answered with isError:
	// a JSON-RPC success that is a failed call.
	ToolError = "tool_error"
)

// Metric names.
const (
	OperationDuration = "mcp.server.operation.duration"
	Calls             = "idemkit.calls"
	Retries           = "idemkit.retries"
	Waits             = "idemkit.waits"
	SweepDeleted      = "idemkit.sweep.deleted"
	SweepPasses       = "idemkit.sweep.passes"
)

// DurationBuckets are the bucket boundaries, in seconds, the semantic
// conventions advise for mcp.server.operation.duration.
var DurationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// sweepCache holds the sweep counters and the global meter provider they
// were made from. otel's global provider delegates only to the first
// provider set after it, so the counters are made again when
// otel.GetMeterProvider returns another one.
var sweepCache atomic.Pointer[sweepCounters]

type sweepCounters struct {
	mp metric.MeterProvider
	in sweepInstruments
}

// sweep returns the sweep counters of the current global meter provider.
func sweep() sweepInstruments {
	mp := otel.GetMeterProvider()
	if !reflect.TypeOf(mp).Comparable() { // == would panic; a rare provider type
		return newSweepInstruments(mp)
	}
	if c := sweepCache.Load(); c != nil && c.mp == mp {
		return c.in
	}
	c := &sweepCounters{mp: mp, in: newSweepInstruments(mp)}
	sweepCache.Store(c)
	return c.in
}

type sweepInstruments struct {
	deleted metric.Int64Counter
	passes  metric.Int64Counter
}

func newSweepInstruments(mp metric.MeterProvider) sweepInstruments {
	m := mp.Meter(ScopeName)
	deleted, err := m.Int64Counter(SweepDeleted, metric.WithUnit("{record}"),
		metric.WithDescription("Expired op records and markers a sweeper deleted."))
	if err != nil {
		otel.Handle(err)
	}
	passes, err := m.Int64Counter(SweepPasses, metric.WithUnit("{pass}"),
		metric.WithDescription("Passes of a sweeper over a store's expired records; error.type is set on those that failed."))
	if err != nil {
		otel.Handle(err)
	}
	return sweepInstruments{deleted, passes}
}

// SweepPass records one pass of a store's sweeper through the global meter
// provider: store names the backend as db.system.name spells it ("sqlite",
// "postgresql", "aws.dynamodb"; "gcp.firestore" and "memory", which the
// conventions do not name), deleted is how many records the pass deleted
// (also when it then failed), err its error, if any. It costs an atomic load
// when no meter provider is set.
func SweepPass(ctx context.Context, store string, deleted int64, err error) {
	recordSweep(ctx, sweep(), store, deleted, err)
}

func recordSweep(ctx context.Context, in sweepInstruments, store string, deleted int64, err error) {
	if !in.passes.Enabled(ctx) && !in.deleted.Enabled(ctx) {
		return
	}
	db := DBSystem.String(store)
	if deleted > 0 {
		in.deleted.Add(ctx, deleted, metric.WithAttributes(db))
	}
	if err != nil {
		in.passes.Add(ctx, 1, metric.WithAttributes(db, ErrorType.String("_OTHER")))
		return
	}
	in.passes.Add(ctx, 1, metric.WithAttributes(db))
}
