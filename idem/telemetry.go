package idem

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/sdk/idem/internal/adapter"
	"github.com/idemkit/sdk/internal/argsfp"
)

// A Tracer is told of every tool call the middleware answers: when it
// arrives, and how it ended. It is the middleware's one hook for telemetry,
// as pgx's QueryTracer is for queries; the module
// github.com/idemkit/sdk/otelidem makes one that records OpenTelemetry
// spans and metrics under the semantic conventions for MCP. Set it once,
// in [Options].Tracer. Its methods run on the call's goroutine, before the
// answer is sent.
type Tracer interface {
	// StartCall is called when a call arrives, before any check. The
	// context it returns is the call's from then on: a span goes in it.
	StartCall(ctx context.Context, c CallInfo) context.Context
	// EndCall is called once, when the call is answered, with the
	// context StartCall returned.
	EndCall(ctx context.Context, e Event)
}

// CallInfo is what a [Tracer] is told of a call as it arrives.
type CallInfo struct {
	Tool string
	// SessionID and ProtocolVersion are the MCP session's, "" when not
	// known.
	SessionID, ProtocolVersion string
	// Meta is the request's _meta, where a client sends its trace context
	// (traceparent, tracestate). It is the caller's: read it, do not keep
	// or change it.
	Meta map[string]any
	// Header is the header of the HTTP request the call came in, nil for a
	// call that did not come over HTTP. A client that sends no trace
	// context in _meta may send it here, as HTTP instrumentation does. It
	// is the caller's and holds its credentials (Authorization): read what
	// you need, do not keep, change or record it.
	Header http.Header
	// Transport is what the call came over, as the OpenTelemetry
	// attribute network.transport names it: "tcp" for HTTP, "pipe" for a
	// call with no HTTP request (stdio, or a transport in process; the
	// go-sdk's SSE transport, which does not pass its requests' headers on,
	// is counted here too).
	Transport string
}

// report tells the logger and the tracer how the call ended: one log
// record, one EndCall.
func (t *tool) report(ctx context.Context, call *adapter.Call, o *op, code Code, replayed bool, d time.Duration) {
	if !t.c.logger.Enabled(ctx, levelOf(code)) && t.c.tracer == nil {
		return
	}
	if o.scope == "" {
		o.scope = t.c.scope(ctx, call)
	}
	t.c.report(ctx, Event{
		Code: code, Replayed: replayed, Tool: o.tool, Scope: o.scope, OpID: o.id, Fingerprint: o.fp,
		Attempts: o.attempts, Waited: o.waited, Duration: d, Err: o.err,
	})
}

// report writes e, how a call ended, to the log record and tells the
// tracer, for the tools registered with AddTool and the guarded ones alike.
func (c *config) report(ctx context.Context, e Event) {
	if level := levelOf(e.Code); c.logger.Enabled(ctx, level) {
		attrs := make([]slog.Attr, 0, 11)
		attrs = append(attrs, slog.String("tool", e.Tool), slog.String("outcome", e.Outcome()))
		if e.Code != "" {
			attrs = append(attrs, slog.String("code", string(e.Code)))
		}
		attrs = append(attrs, slog.Bool("replayed", e.Replayed))
		if e.Scope != "" {
			attrs = append(attrs, slog.String("scope", e.Scope))
		}
		if e.OpID != "" {
			attrs = append(attrs, slog.String("op_id_hash", hashOpID(e.OpID)))
		}
		if e.Fingerprint != "" {
			attrs = append(attrs, slog.String("fingerprint", e.Fingerprint))
		}
		if e.Attempts > 1 {
			attrs = append(attrs, slog.Int("attempts", e.Attempts))
		}
		if e.Waited {
			attrs = append(attrs, slog.Bool("waited", true))
		}
		attrs = append(attrs, slog.Duration("duration", e.Duration))
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		c.logger.LogAttrs(ctx, level, "idem: tool call", attrs...)
	}
	if c.tracer != nil {
		c.tracer.EndCall(ctx, e)
	}
}

// codeOf is the code a call was answered with, a refusal's or the
// handler's error result's; "" for an answer.
func codeOf(a *answer, refused *Error) Code {
	if refused != nil {
		return refused.Code
	}
	return a.errorCode()
}

// levelOf is the level of a call's log record: Info for answers and for
// refusals the caller can act on; Warn for a reused op id (a client bug)
// and contention (busy, contended); Error for internal errors and unknown
// outcomes, which an operator must look at.
func levelOf(code Code) slog.Level {
	switch {
	case code == CodeUnknownOutcome || code == CodeInternal:
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
	sum := argsfp.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}
