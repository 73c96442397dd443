package otelidem

import "go.opentelemetry.io/otel/attribute"

// scopeName is the instrumentation scope of the tracer and the meter a
// Tracer gets from its providers.
const scopeName = "github.com/idemkit/sdk"

// Attribute keys. The first ones are the OpenTelemetry semantic conventions
// for MCP (semconv v1.41.0, where the conventions were last in the Go
// module; they now live in the GenAI conventions); the idemkit.* ones are
// idemkit's own.
const (
	keyMethodName      = attribute.Key("mcp.method.name")
	keySessionID       = attribute.Key("mcp.session.id")
	keyProtocolVersion = attribute.Key("mcp.protocol.version")
	keyToolName        = attribute.Key("gen_ai.tool.name")
	keyOperationName   = attribute.Key("gen_ai.operation.name")
	keyErrorType       = attribute.Key("error.type")
	keyDBSystem        = attribute.Key("db.system.name")

	keyNetworkTransport    = attribute.Key("network.transport")
	keyNetworkProtocolName = attribute.Key("network.protocol.name")

	keyOutcome  = attribute.Key("idemkit.outcome")
	keyCode     = attribute.Key("idemkit.code")
	keyReplayed = attribute.Key("idemkit.replayed")
	keyOpIDHash = attribute.Key("idemkit.op_id.hash")
	keyAttempts = attribute.Key("idemkit.attempts")
	keyWaited   = attribute.Key("idemkit.waited")
)

// Values of the semantic conventions' attributes.
const (
	methodToolsCall = "tools/call"
	executeTool     = "execute_tool"
	// protocolHTTP is network.protocol.name for a call that came over HTTP.
	protocolHTTP = "http"
	// toolError is error.type for a tools/call answered with isError:
	// a JSON-RPC success that is a failed call.
	toolError = "tool_error"
)

// Metric names.
const (
	metricDuration     = "mcp.server.operation.duration"
	metricCalls        = "idemkit.calls"
	metricRetries      = "idemkit.retries"
	metricWaits        = "idemkit.waits"
	metricSweepDeleted = "idemkit.sweep.deleted"
	metricSweepPasses  = "idemkit.sweep.passes"
)

// durationBuckets are the bucket boundaries, in seconds, the semantic
// conventions advise for mcp.server.operation.duration.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
