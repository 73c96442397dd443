// Package otelidem records OpenTelemetry spans and metrics of the tool calls
// idemkit's middleware answers, and of the stores' sweeps, under the
// OpenTelemetry semantic conventions for MCP. A server opts in by setting a
// Tracer in the options of its Guard:
//
//	tr := otelidem.NewTracer(nil) // the global providers, or Options' own
//	guard := idem.New(store, &idem.Options{Tracer: tr})
//
// and, for the sweep's counters, with tr.OnSweep as its store's OnSweep.
//
// Each call gets a server span named "tools/call TOOL", a child of the
// trace context the client sent in _meta (traceparent, tracestate), or else
// of the span in the request's context, or else of the trace context in the
// HTTP request's headers ([Tracer.StartCall] says how it is read), with the
// attributes mcp.method.name, gen_ai.tool.name, gen_ai.operation.name,
// mcp.session.id, mcp.protocol.version, network.transport,
// network.protocol.name, idemkit.outcome, idemkit.replayed,
// idemkit.op_id.hash, idemkit.attempts, idemkit.waited, idemkit.code and
// error.type. The metrics are mcp.server.operation.duration, idemkit.calls,
// idemkit.retries, idemkit.waits, idemkit.sweep.deleted and
// idemkit.sweep.passes.
//
// This package is a module of its own, so that a server that does not use
// OpenTelemetry has none of it in its module graph.
package otelidem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// Options are a Tracer's providers. A nil provider is the global one
// (otel.GetTracerProvider, otel.GetMeterProvider), which drops what it
// gets until the program sets one.
type Options struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// A Tracer is an [idem.Tracer] that records a span and metrics per call. It
// is safe for concurrent use.
type Tracer struct {
	tracer   trace.Tracer
	duration metric.Float64Histogram
	calls    metric.Int64Counter
	retries  metric.Int64Counter
	waits    metric.Int64Counter
	deleted  metric.Int64Counter
	passes   metric.Int64Counter
}

// NewTracer returns a Tracer that records through the providers of opts
// (nil: the global ones).
func NewTracer(opts *Options) *Tracer {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	m := o.MeterProvider.Meter(scopeName)
	t := &Tracer{tracer: o.TracerProvider.Tracer(scopeName)}
	var errs [6]error
	t.duration, errs[0] = m.Float64Histogram(metricDuration, metric.WithUnit("s"),
		metric.WithDescription("MCP request duration as observed on the receiver from the time it was received until the result is sent."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.calls, errs[1] = m.Int64Counter(metricCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls answered by idemkit's middleware, by outcome (first, replay, refused, unknown) and code."))
	t.retries, errs[2] = m.Int64Counter(metricRetries, metric.WithUnit("{attempt}"),
		metric.WithDescription("Transaction attempts beyond a call's first: the store retried after a conflict with concurrent writes."))
	t.waits, errs[3] = m.Int64Counter(metricWaits, metric.WithUnit("{call}"),
		metric.WithDescription("Calls that waited for a concurrent call with the same op id to finish."))
	t.deleted, errs[4] = m.Int64Counter(metricSweepDeleted, metric.WithUnit("{record}"),
		metric.WithDescription("Expired op records and markers a sweeper deleted."))
	t.passes, errs[5] = m.Int64Counter(metricSweepPasses, metric.WithUnit("{pass}"),
		metric.WithDescription("Passes of a sweeper over a store's expired records; error.type is set on those that failed."))
	for _, err := range errs {
		if err != nil {
			otel.Handle(err)
		}
	}
	return t
}

// StartCall starts the call's span. Its parent is the trace context the
// client sent in _meta, as the semantic conventions for MCP propagate it,
// linked to the span in ctx if there is one; else the span in ctx; else,
// for a call that came over HTTP, the trace context in the request's
// headers (traceparent, tracestate), for a client that traces its HTTP
// requests only. The trace context is read with the global propagator
// when the program set one, and as W3C Trace Context otherwise.
func (t *Tracer) StartCall(ctx context.Context, c idem.CallInfo) context.Context {
	ctx, link := parentOf(ctx, c)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	if link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
	}
	ctx, span := t.tracer.Start(ctx, methodToolsCall+" "+c.Tool, opts...)
	if span.IsRecording() {
		span.SetAttributes(
			keyMethodName.String(methodToolsCall),
			keyToolName.String(c.Tool),
			keyOperationName.String(executeTool),
		)
		if c.SessionID != "" {
			span.SetAttributes(keySessionID.String(c.SessionID))
		}
		if c.ProtocolVersion != "" {
			span.SetAttributes(keyProtocolVersion.String(c.ProtocolVersion))
		}
		if c.Transport != "" {
			span.SetAttributes(keyNetworkTransport.String(c.Transport))
		}
		if c.Header != nil {
			span.SetAttributes(keyNetworkProtocolName.String(protocolHTTP))
		}
	}
	return context.WithValue(ctx, callKey{}, callAttrs{protocolVersion: c.ProtocolVersion, transport: c.Transport, overHTTP: c.Header != nil})
}

// parentOf returns ctx with the trace context the call's span is to be a
// child of, and the span to link it to: the ambient span (of HTTP
// instrumentation, or a middleware), when the client's trace context in
// _meta takes its place.
func parentOf(ctx context.Context, c idem.CallInfo) (_ context.Context, link trace.SpanContext) {
	ambient := trace.SpanContextFromContext(ctx)
	var p propagation.TextMapPropagator
	if len(c.Meta) > 0 {
		p = propagator()
		ctx = p.Extract(ctx, metaCarrier(c.Meta))
		if sent := trace.SpanContextFromContext(ctx); sent.IsValid() && !sent.Equal(ambient) {
			return ctx, ambient
		}
	}
	if !ambient.IsValid() && len(c.Header) > 0 {
		if p == nil {
			p = propagator()
		}
		ctx = p.Extract(ctx, propagation.HeaderCarrier(c.Header))
	}
	return ctx, trace.SpanContext{}
}

// propagator is the global propagator, if the program set one, and W3C
// Trace Context otherwise: the global one reads nothing until set, and a
// client that traces its MCP calls sends traceparent and tracestate.
func propagator() propagation.TextMapPropagator {
	p := otel.GetTextMapPropagator()
	if len(p.Fields()) == 0 {
		return propagation.TraceContext{}
	}
	return p
}

// callKey is the context key of a call's callAttrs.
type callKey struct{}

// callAttrs are what StartCall is told of a call that its duration metric,
// recorded in EndCall, carries too.
type callAttrs struct {
	protocolVersion, transport string
	overHTTP                   bool
}

// EndCall ends the call's span and records its metrics.
func (t *Tracer) EndCall(ctx context.Context, e idem.Event) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(
			keyOutcome.String(e.Outcome()),
			keyReplayed.Bool(e.Replayed),
		)
		if e.OpID != "" {
			span.SetAttributes(keyOpIDHash.String(hashOpID(e.OpID)))
		}
		if e.Attempts > 1 {
			span.SetAttributes(keyAttempts.Int(e.Attempts))
		}
		if e.Waited {
			span.SetAttributes(keyWaited.Bool(true))
		}
		if e.Code != "" {
			span.SetAttributes(keyCode.String(string(e.Code)), keyErrorType.String(toolError))
			span.SetStatus(codes.Error, string(e.Code))
		}
		span.End()
	}
	if !t.calls.Enabled(ctx) {
		return
	}
	tool := keyToolName.String(e.Tool)
	out := keyOutcome.String(e.Outcome())
	if e.Code != "" {
		t.calls.Add(ctx, 1, metric.WithAttributes(tool, out, keyCode.String(string(e.Code))))
	} else {
		t.calls.Add(ctx, 1, metric.WithAttributes(tool, out))
	}
	durAttrs := make([]attribute.KeyValue, 0, 8)
	durAttrs = append(durAttrs, keyMethodName.String(methodToolsCall), tool, keyOperationName.String(executeTool), out)
	if e.Code != "" {
		durAttrs = append(durAttrs, keyErrorType.String(toolError))
	}
	if c, ok := ctx.Value(callKey{}).(callAttrs); ok {
		if c.protocolVersion != "" {
			durAttrs = append(durAttrs, keyProtocolVersion.String(c.protocolVersion))
		}
		if c.transport != "" {
			durAttrs = append(durAttrs, keyNetworkTransport.String(c.transport))
		}
		if c.overHTTP {
			durAttrs = append(durAttrs, keyNetworkProtocolName.String(protocolHTTP))
		}
	}
	t.duration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(durAttrs...))
	if e.Attempts > 1 {
		t.retries.Add(ctx, int64(e.Attempts-1), metric.WithAttributes(tool))
	}
	if e.Waited {
		t.waits.Add(ctx, 1, metric.WithAttributes(tool))
	}
}

// OnSweep counts a round of a store's background sweep: give it as the
// store's OnSweep (sqlite.Options, postgres.Options, memory.Options).
// db.system.name is the store's name as the sweep reports it ("sqlite",
// "postgresql", "memory").
func (t *Tracer) OnSweep(r kit.SweepRound) {
	ctx := context.Background()
	db := keyDBSystem.String(r.Store)
	if r.Deleted > 0 {
		t.deleted.Add(ctx, int64(r.Deleted), metric.WithAttributes(db))
	}
	if r.Err != nil {
		t.passes.Add(ctx, 1, metric.WithAttributes(db, keyErrorType.String("_OTHER")))
		return
	}
	t.passes.Add(ctx, 1, metric.WithAttributes(db))
}

// hashOpID is what spans carry instead of an op id, as in the middleware's
// log record (op_id_hash): the first 16 hex digits of its SHA-256. An op
// id is a capability within its scope, so it is not written out.
func hashOpID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// metaCarrier reads a propagated trace context from a request's _meta.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) {} // _meta is the caller's; nothing is injected into it

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

var _ idem.Tracer = (*Tracer)(nil)
