package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// guarded is a [Guard]'s middleware in no MCP library's types
// (adapter.Guarded), as [Guard.Middleware] uses it for the go-sdk and the
// module github.com/idemkit/sdk/idem/mcpgo for mark3labs/mcp-go.
type guarded struct {
	g      *Guard
	ps     map[string]*policy
	decode func(json.RawMessage) (any, error)

	mu   sync.Mutex         // guards byID
	byID map[any]*guardTool // by the library's own tool value, for libraries that keep one (the go-sdk's *mcp.Tool)
}

// guard returns the middleware that guards tools, as [Guard.Middleware]
// does; decode turns a stored result (its JSON) into a fresh value of the
// library's result type. It panics where Middleware does.
func (g *Guard) guard(tools Tools, decode adapter.Decoder) *guarded {
	return &guarded{g: g, ps: g.policies(tools), decode: decode, byID: make(map[any]*guardTool)}
}

// Guards reports whether calls of the tool named name go through Call.
func (a *guarded) Guards(name string) bool { return a.ps[name] != nil }

// Publish returns def, a guarded tool as the server lists it, as it is
// published: honest hints, op_id in the schema, a description that says
// which arguments are keys. ok is false for a tool that is not guarded,
// or whose definition cannot be (the error is logged): publish def as it
// is.
func (a *guarded) Publish(ctx context.Context, def adapter.ToolDef) (pub adapter.ToolDef, ok bool) {
	gt := a.tool(ctx, def)
	if gt == nil {
		return def, false
	}
	return gt.t.def, true
}

// Status is get_operation as published: readOnlyHint true, destructiveHint
// and openWorldHint false.
func (a *guarded) Status() adapter.ToolDef { return a.g.status.Def }

// ListsStatus reports whether get_operation is to be listed: some guarded
// tool takes an op id, which is what it looks operations up by. (A server
// that lists its own get_operation gets Status in its place.)
func (a *guarded) ListsStatus() bool {
	for _, p := range a.ps {
		if p.c.opID {
			return true
		}
	}
	return false
}

// Call answers c, a call of the guarded tool def (as the server lists it):
// a refusal, a replay, or run's own answer (Answer.Passed). run calls the
// server's handler with the arguments it is to get.
func (a *guarded) Call(ctx context.Context, def adapter.ToolDef, c *adapter.Call, run func(ctx context.Context, args json.RawMessage) (adapter.Reply, error)) adapter.Answer {
	return a.call(ctx, a.tool(ctx, def), c, run)
}

// call answers c, a call of gt (nil: a tool that cannot be guarded).
func (a *guarded) call(ctx context.Context, gt *guardTool, c *adapter.Call, run runFunc) adapter.Answer {
	if gt == nil {
		var r handlerReply
		r.Reply, r.err = run(ctx, c.Arguments)
		return r.passed()
	}
	return a.g.serve(ctx, gt, c, run)
}

// Lookup answers c, a call of get_operation.
func (a *guarded) Lookup(ctx context.Context, c *adapter.Call) adapter.Answer {
	return a.g.lookup(ctx, a.ps, c, a.decode)
}

// toolByID is tool for a definition the library keeps as one value, id (a
// pointer), so that it is not encoded again on every call to find its
// guarded form: without it a replay costs 1.21 (SQLite) and 1.25
// (PostgreSQL) times as much, a first call 1.01 and 1.02 (paired rounds
// of BenchmarkGuard).
func (a *guarded) toolByID(ctx context.Context, id any, def func() adapter.ToolDef) *guardTool {
	a.mu.Lock()
	gt, ok := a.byID[id]
	a.mu.Unlock()
	if ok {
		return gt
	}
	if gt = a.tool(ctx, def()); gt != nil {
		a.mu.Lock()
		if len(a.byID) >= maxGuardDefs {
			clear(a.byID) // a server that makes new definitions without end
		}
		a.byID[id] = gt
		a.mu.Unlock()
	}
	return gt
}

// tool is the guarded form of def; nil when def's tool is not guarded or
// cannot be.
func (a *guarded) tool(ctx context.Context, def adapter.ToolDef) *guardTool {
	p := a.ps[def.Name]
	if p == nil {
		return nil
	}
	raw, err := json.Marshal(def)
	if err == nil {
		var gt *guardTool
		if gt, err = a.g.guardTool(p, def, raw, a.decode); err == nil {
			return gt
		}
	}
	a.g.c.logger.LogAttrs(ctx, slog.LevelError, "idem: a tool named in Middleware cannot be guarded; it runs unguarded",
		slog.String("tool", p.name), slog.String("error", fmt.Sprint(err)))
	return nil
}

// What this package lends its adapters (package adapter says what each
// is).
func init() {
	adapter.NewGuard = func(s Store, opts any, scope func(ctx context.Context, c *adapter.Call) string) any {
		o, _ := opts.(*Options)
		if o == nil {
			o = &Options{}
		}
		return newGuard(s, o, scope)
	}
	adapter.Guard = func(g any, tools any, decode adapter.Decoder) adapter.Guarded {
		return g.(*Guard).guard(tools.(Tools), decode)
	}
	adapter.Wrap = func(def adapter.ToolDef, s Store, h adapter.Handler, decode adapter.Decoder, opts any) (*adapter.Wrapped, error) {
		o, _ := opts.([]Option)
		return wrap(def, s, h, decode, o)
	}
	adapter.WrapStatus = statusTool
	adapter.Reconcile = func(f func(ctx context.Context, c *adapter.Call, p any) (any, error)) any {
		if f == nil {
			return reconcileOption(nil)
		}
		return reconcileOption(func(ctx context.Context, c *adapter.Call, p Pending) (any, error) { return f(ctx, c, p) })
	}
	adapter.HasOpID = hasOpID
}
