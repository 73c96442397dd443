package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/sdk/internal/telemetry"
)

// An Outcome is how a tool call ended: the outcome attribute of the
// middleware's log record, span and metrics, and [Event.Outcome].
type Outcome string

const (
	// OutcomeFirst: the handler ran and its answer was sent, committed with
	// the handler's writes (and, with an op id, stored for repeats).
	OutcomeFirst Outcome = "first"
	// OutcomeReplay: the answer is a stored one, for a repeat of an op id;
	// nothing the call did was kept.
	OutcomeReplay Outcome = "replay"
	// OutcomeRefused: the answer is a tool error with a code
	// ([Event.Code]): a refusal of the middleware (invalid_arguments,
	// key_reused, busy, ...), or the handler's error or IsError result
	// (not_saved, or the handler's own code). Nothing the call did was
	// kept.
	OutcomeRefused Outcome = "refused"
	// OutcomeUnknown: the store could not tell whether the commit landed
	// (code unknown_outcome).
	OutcomeUnknown Outcome = "unknown"
)

// TracerProvider sets where the middleware's spans go: one span per tool
// call (docs/observability.md). The default is the global provider
// (otel.GetTracerProvider), which drops them until the program sets one.
func TracerProvider(tp trace.TracerProvider) Option {
	return Option{server: "TracerProvider", apply: func(c *config) {
		if tp == nil {
			c.invalid("TracerProvider needs a provider")
			return
		}
		c.tracerProvider = tp
	}}
}

// MeterProvider sets where the middleware's metrics go (docs/observability.md).
// The default is the global provider (otel.GetMeterProvider), which drops
// them until the program sets one.
func MeterProvider(mp metric.MeterProvider) Option {
	return Option{server: "MeterProvider", apply: func(c *config) {
		if mp == nil {
			c.invalid("MeterProvider needs a provider")
			return
		}
		c.meterProvider = mp
	}}
}

// instruments are a tool's tracer and metric instruments. A nil
// *instruments records nothing.
type instruments struct {
	tool     string // the tool's name (set by newTool)
	spanName string // and its span's, made once
	tracer   trace.Tracer
	duration metric.Float64Histogram
	calls    metric.Int64Counter
	retries  metric.Int64Counter
	waits    metric.Int64Counter
}

// named sets the name of the tool in's calls go to.
func (in *instruments) named(tool string) {
	if in != nil {
		in.tool, in.spanName = tool, telemetry.MethodToolsCall+" "+tool
	}
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) *instruments {
	m := mp.Meter(telemetry.ScopeName)
	in := &instruments{tracer: tp.Tracer(telemetry.ScopeName)}
	var errs [4]error
	in.duration, errs[0] = m.Float64Histogram(telemetry.OperationDuration, metric.WithUnit("s"),
		metric.WithDescription("MCP request duration as observed on the receiver from the time it was received until the result is sent."),
		metric.WithExplicitBucketBoundaries(telemetry.DurationBuckets...))
	in.calls, errs[1] = m.Int64Counter(telemetry.Calls, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls answered by idemkit's middleware, by outcome (first, replay, refused, unknown) and code."))
	in.retries, errs[2] = m.Int64Counter(telemetry.Retries, metric.WithUnit("{attempt}"),
		metric.WithDescription("Transaction attempts beyond a call's first: the store retried after a conflict with concurrent writes."))
	in.waits, errs[3] = m.Int64Counter(telemetry.Waits, metric.WithUnit("{call}"),
		metric.WithDescription("Calls that waited for a concurrent call with the same op id to finish."))
	for _, err := range errs {
		if err != nil {
			otel.Handle(err)
		}
	}
	return in
}

var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// start starts the call's span, a child of the span in ctx or else of the
// trace context the client sent in _meta (traceparent, as the semantic
// conventions for MCP propagate it).
func (in *instruments) start(ctx context.Context, c *Call) (context.Context, trace.Span) {
	if in == nil {
		return ctx, nil
	}
	if _, ok := c.Meta["traceparent"]; ok && !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = otel.GetTextMapPropagator().Extract(ctx, metaCarrier(c.Meta))
	}
	name := in.spanName
	if c.Tool != in.tool {
		name = telemetry.MethodToolsCall + " " + c.Tool
	}
	ctx, span := in.tracer.Start(ctx, name, serverSpan...)
	if !span.IsRecording() {
		return ctx, nil
	}
	span.SetAttributes(
		telemetry.MethodName.String(telemetry.MethodToolsCall),
		telemetry.ToolName.String(c.Tool),
		telemetry.OperationName.String(telemetry.ExecuteTool),
	)
	if c.SessionID != "" {
		span.SetAttributes(telemetry.SessionID.String(c.SessionID))
	}
	if c.ProtocolVersion != "" {
		span.SetAttributes(telemetry.ProtocolVersion.String(c.ProtocolVersion))
	}
	return ctx, span
}

// metaCarrier reads a propagated trace context from a request's _meta.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// report tells the logger, the span, the metrics and the Observe hook how
// the call ended: one log record, one span end, one measurement of each.
func (t *tool[In, Out]) report(ctx context.Context, span trace.Span, call *Call, o *op, outcome Outcome, code Code, d time.Duration) {
	c := t.c
	level := levelOf(outcome, code)
	logged := c.logger.Enabled(ctx, level)
	in := c.instruments
	counted := in != nil && in.calls.Enabled(ctx)
	if !logged && span == nil && !counted && c.observe == nil {
		return
	}
	if o.scope == "" && (logged || c.observe != nil) {
		o.scope = c.scope(ctx, call)
	}
	opHash := ""
	if o.id != "" && (logged || span != nil) {
		opHash = hashOpID(o.id)
	}
	if logged {
		attrs := make([]slog.Attr, 0, 11)
		attrs = append(attrs, slog.String("tool", o.tool), slog.String("outcome", string(outcome)))
		if code != "" {
			attrs = append(attrs, slog.String("code", string(code)))
		}
		attrs = append(attrs, slog.Bool("replayed", outcome == OutcomeReplay))
		if o.scope != "" {
			attrs = append(attrs, slog.String("scope", o.scope))
		}
		if opHash != "" {
			attrs = append(attrs, slog.String("op_id_hash", opHash))
		}
		if o.fp != "" {
			attrs = append(attrs, slog.String("fingerprint", o.fp))
		}
		if o.attempts > 1 {
			attrs = append(attrs, slog.Int("attempts", o.attempts))
		}
		if o.waited {
			attrs = append(attrs, slog.Bool("waited", true))
		}
		attrs = append(attrs, slog.Duration("duration", d))
		if o.err != nil {
			attrs = append(attrs, slog.String("error", o.err.Error()))
		}
		c.logger.LogAttrs(ctx, level, "idem: tool call", attrs...)
	}
	if span != nil {
		span.SetAttributes(
			telemetry.Outcome.String(string(outcome)),
			telemetry.Replayed.Bool(outcome == OutcomeReplay),
		)
		if opHash != "" {
			span.SetAttributes(telemetry.OpIDHash.String(opHash))
		}
		if o.attempts > 1 {
			span.SetAttributes(telemetry.Attempts.Int(o.attempts))
		}
		if o.waited {
			span.SetAttributes(telemetry.Waited.Bool(true))
		}
		if code != "" {
			span.SetAttributes(telemetry.Code.String(string(code)), telemetry.ErrorType.String(telemetry.ToolError))
			span.SetStatus(codes.Error, string(code))
		}
		span.End()
	}
	if counted {
		tool := telemetry.ToolName.String(o.tool)
		out := telemetry.Outcome.String(string(outcome))
		if code != "" {
			in.calls.Add(ctx, 1, metric.WithAttributes(tool, out, telemetry.Code.String(string(code))))
		} else {
			in.calls.Add(ctx, 1, metric.WithAttributes(tool, out))
		}
		durAttrs := []attribute.KeyValue{
			telemetry.MethodName.String(telemetry.MethodToolsCall), tool,
			telemetry.OperationName.String(telemetry.ExecuteTool), out,
		}
		if code != "" {
			durAttrs = append(durAttrs, telemetry.ErrorType.String(telemetry.ToolError))
		}
		in.duration.Record(ctx, d.Seconds(), metric.WithAttributes(durAttrs...))
		if o.attempts > 1 {
			in.retries.Add(ctx, int64(o.attempts-1), metric.WithAttributes(tool))
		}
		if o.waited {
			in.waits.Add(ctx, 1, metric.WithAttributes(tool))
		}
	}
	if c.observe != nil {
		c.observe(ctx, Event{
			Outcome: outcome, Code: code, Tool: o.tool, Scope: o.scope, OpID: o.id, Fingerprint: o.fp,
			Attempts: o.attempts, Waited: o.waited, Duration: d, Err: o.err,
		})
	}
}

// outcomeOf is how a call ended: answered with a, or refused.
func outcomeOf(a *answer, refused *Error) (Outcome, Code) {
	code := a.errorCode()
	if refused != nil {
		code = refused.Code
	}
	switch {
	case code == CodeUnknownOutcome:
		return OutcomeUnknown, code
	case code != "":
		return OutcomeRefused, code
	case a.replayed:
		return OutcomeReplay, ""
	}
	return OutcomeFirst, ""
}

// levelOf is the level of a call's log record: Info for answers and for
// refusals the caller can act on; Warn for a reused op id (a client bug)
// and contention (busy, contended); Error for internal errors and unknown
// outcomes, which an operator must look at.
func levelOf(outcome Outcome, code Code) slog.Level {
	switch {
	case outcome == OutcomeUnknown || code == CodeInternal:
		return slog.LevelError
	case code == CodeKeyReused || code == CodeBusy || code == CodeContended:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// hashOpID is what logs and spans carry instead of an op id: the first 16
// hex digits of its SHA-256. An op id is a capability within its scope (with
// it, get_operation reads the stored answer), so it is not written out; an
// operator given one finds its records with
// printf %s "$OP_ID" | sha256sum | cut -c1-16.
func hashOpID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}
