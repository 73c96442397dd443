package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// This file is the middleware's side of an adapter to an MCP library. The
// middleware itself knows no MCP library: it takes an adapter.Call and
// answers an adapter.Answer (package idem/internal/adapter). [AddTool] and
// [Tool] adapt it to the official go-sdk; the module
// github.com/idemkit/sdk/idem/mcpgo adapts it to mark3labs/mcp-go.

// hasOpID reports whether the call carries an op id, as the op_id argument
// or in _meta, well formed or not: such a call is queued or replayed (see
// package idem/target).
func hasOpID(c *adapter.Call) bool {
	args, _ := parseArgs(c.Arguments)
	id, err := opIDOf(args, c.Meta)
	return id != "" || err != nil
}

// wrap wraps h, a handler for tool def, as [AddTool] does: the same
// checks, transaction, op record, replay and refusals, and the same
// published definition (adapter.Wrap).
func wrap(def adapter.ToolDef, s Store, h adapter.Handler, decode adapter.Decoder, opts []Option) (*adapter.Wrapped, error) {
	c, s := configFor(s, opts)
	t, err := newTool(def, c, s, h, decode)
	if err != nil {
		return nil, fmt.Errorf("idem: tool %q: %w", def.Name, err)
	}
	return &adapter.Wrapped{Def: t.def, Call: t.serve}, nil
}

// serve answers one call: the answer, or the refusal, that call gives,
// reported to the logger and the tracer.
func (t *tool) serve(ctx context.Context, c *adapter.Call) adapter.Answer {
	start := time.Now()
	if t.c.tracer != nil {
		ctx = t.c.tracer.StartCall(ctx, CallInfo{Tool: c.Tool, SessionID: c.SessionID, ProtocolVersion: c.ProtocolVersion, Meta: c.Meta, Header: c.Header, Transport: c.Transport})
	}
	o := &op{tool: c.Tool}
	a, refused := t.call(ctx, o, c)
	var ans adapter.Answer
	if refused != nil {
		ans = refusal(refused)
	} else {
		ans = a.answer()
	}
	t.report(ctx, c, o, codeOf(a, refused), refused == nil && a.replayed, time.Since(start))
	return ans
}

// answer is what a call that was not refused sends back.
func (a *answer) answer() adapter.Answer {
	ans := adapter.Answer{Result: a.res, Structured: a.out}
	switch {
	case a.replayed:
		ans.Meta = map[string]any{MetaReplayed: true}
	case a.code != "":
		ans.Meta = map[string]any{MetaError: string(a.code)}
	}
	return ans
}

// refusal is the answer to a call the middleware refused with e.
func refusal(e *Error) adapter.Answer {
	meta := map[string]any{MetaError: string(e.Code)}
	text := e.Message
	if len(e.Candidates) > 0 {
		meta[metaCandidates] = e.Candidates
		b, _ := json.Marshal(e.Candidates)
		text += " Candidates: " + string(b)
	}
	if e.OpID != "" {
		meta[MetaOpID] = e.OpID
	}
	return adapter.Answer{Meta: meta, Refused: true, Text: text}
}
