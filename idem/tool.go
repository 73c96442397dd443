package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AddTool registers h on srv as tool t, wrapped by [Tool], and makes the
// tool's metadata say what the wrapping guarantees:
//
//   - IdempotentHint is true only when the tool has record keys ([Keys]) or
//     accepts an op id ([OpID]); clients such as agents that reconnect replay a
//     lost call only when it is set.
//   - The description says which arguments are record keys and that op_id is
//     for apps replaying queued requests, so a model does not invent one.
//   - The input schema gains an optional op_id property (when the tool
//     accepts op ids and In has none) and notes on the key properties.
//
// AddTool also installs on srv, once, a receiving middleware that drops
// from idemkit refusals the zero output the SDK fills in for tools with typed
// output. t is not modified. AddTool panics, like [mcp.AddTool], if the tool claims
// to be both read-only and destructive, if a key names no input property, or
// if the schema cannot be inferred.
func AddTool[In, Out any](srv *mcp.Server, t *mcp.Tool, s Store, h HandlerFor[In, Out], opts ...Option) {
	c := newConfig(opts)
	tt, err := describe[In](t, c)
	if err != nil {
		panic(fmt.Sprintf("idem.AddTool: tool %q: %v", t.Name, err))
	}
	installRefusalCleanup(srv)
	mcp.AddTool(srv, tt, newToolHandler(c, s, h))
}

// installRefusalCleanup installs refusalCleanup on srv, once.
func installRefusalCleanup(srv *mcp.Server) {
	if w := weak.Make(srv); !storeOnce(w) {
		// Forget the server when it is collected (servers made per
		// request would otherwise pile up here).
		runtime.AddCleanup(srv, func(w weak.Pointer[mcp.Server]) { cleanedServers.Delete(w) }, w)
		srv.AddReceivingMiddleware(refusalCleanup)
	}
}

// cleanedServers holds the servers refusalCleanup is installed on.
var cleanedServers sync.Map // weak.Pointer[mcp.Server] -> bool

// storeOnce records w and reports whether it was recorded before.
func storeOnce(w weak.Pointer[mcp.Server]) bool {
	_, loaded := cleanedServers.LoadOrStore(w, true)
	return loaded
}

// restorerKey marks the context of a tool call that refusalCleanup wraps.
type restorerKey struct{}

// refusalCleanup is the receiving middleware AddTool installs. It marks the
// context so the middleware answers refusals as errors (see refuse), turns
// those back into refusal results after the SDK's output handling, and
// removes from refusals returned as results what the SDK adds to them for
// tools with typed output (the zero output as structuredContent and, for
// outputs that are not objects, as a second text block), so a client that
// reads structured content first does not take a refusal for an empty answer.
func refusalCleanup(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		res, err := next(context.WithValue(ctx, restorerKey{}, true), method, req)
		r, ok := res.(*mcp.CallToolResult)
		if !ok || r == nil || !r.IsError {
			return res, err
		}
		var e *Error
		if errors.As(r.GetError(), &e) {
			ref := refusal(e)
			for k, v := range r.Meta { // keep what the SDK put there (server info)
				if _, ours := ref.Meta[k]; !ours {
					ref.Meta[k] = v
				}
			}
			return ref, err
		}
		if _, refused := r.Meta[MetaError]; refused {
			r.StructuredContent = nil
			r.Content = r.Content[:min(len(r.Content), 1)]
		}
		return res, err
	}
}

// describe returns a copy of t with honest annotations, description and
// input schema for the configuration c.
func describe[In any](t *mcp.Tool, c *config) (*mcp.Tool, error) {
	tt := *t
	var ann mcp.ToolAnnotations
	if t.Annotations != nil {
		ann = *t.Annotations
	}
	if ann.ReadOnlyHint && ann.DestructiveHint != nil && *ann.DestructiveHint {
		return nil, fmt.Errorf("annotations claim both read-only and destructive")
	}
	keyed := len(c.keys) > 0 || c.opID
	ann.IdempotentHint = keyed
	tt.Annotations = &ann

	schema, err := inputSchema[In](t)
	if err != nil {
		return nil, err
	}
	for _, k := range c.keys {
		p, ok := schema.Properties[k]
		if !ok {
			return nil, fmt.Errorf("key %q is not an input property", k)
		}
		p = p.CloneSchemas()
		p.Description = strings.TrimSpace(p.Description + " Required. Record key: names the record this call writes; a repeat with the same value writes the same record.")
		schema.Properties[k] = p
	}
	// Keys leave the schema's required list: the middleware refuses a
	// missing key itself, with missing_key and a message that names the
	// argument, where the SDK's validation would answer without a code.
	// op_id leaves it too: it is optional whatever In says (an In with its
	// own op_id field without omitempty would make it required, and a model
	// would then invent one).
	schema.Required = slices.DeleteFunc(slices.Clone(schema.Required), func(r string) bool {
		return slices.Contains(c.keys, r) || (c.opID && r == OpIDArgument)
	})
	if c.opID {
		if _, ok := schema.Properties[OpIDArgument]; !ok {
			// No type or pattern: the middleware checks the op id and
			// refuses with invalid_op_id, without echoing it as the
			// SDK's schema validation would.
			schema.Properties[OpIDArgument] = &jsonschema.Schema{
				Description: "Optional string of 1..128 printable ASCII characters without spaces, " + opIDNote,
			}
		}
	}
	tt.InputSchema = schema

	var notes []string
	if len(c.keys) > 0 {
		notes = append(notes, fmt.Sprintf("Safe to retry: calls with the same %s write the same record, so a repeat does not duplicate it.", strings.Join(quoteAll(c.keys), ", ")))
	}
	if c.opID {
		notes = append(notes, "op_id (optional) is "+opIDNote)
	}
	if len(notes) > 0 {
		tt.Description = strings.TrimSpace(tt.Description + "\n\n" + strings.Join(notes, "\n"))
	}
	return &tt, nil
}

const opIDNote = "for apps replaying queued requests: the app mints one per intended operation before the first attempt and resends it unchanged on every retry, and a repeat returns the first result. Leave it out unless your client minted it; never invent one."

// inputSchema returns a copy of t's input schema, or the one inferred from
// In, that describe may edit.
func inputSchema[In any](t *mcp.Tool) (*jsonschema.Schema, error) {
	switch s := t.InputSchema.(type) {
	case nil:
		if reflect.TypeFor[In]() == reflect.TypeFor[any]() {
			return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}, nil
		}
		inferred, err := jsonschema.For[In](nil)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		if inferred.Properties == nil {
			inferred.Properties = map[string]*jsonschema.Schema{}
		}
		return inferred, nil
	case *jsonschema.Schema:
		cp := s.CloneSchemas()
		cp.Properties = maps.Clone(cp.Properties)
		if cp.Properties == nil {
			cp.Properties = map[string]*jsonschema.Schema{}
		}
		return cp, nil
	}
	// Any other form the SDK accepts (json.RawMessage, a map) is read into a
	// schema of our own, which leaves the caller's value alone.
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var cp jsonschema.Schema
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if cp.Properties == nil {
		cp.Properties = map[string]*jsonschema.Schema{}
	}
	return &cp, nil
}

func ptr[T any](v T) *T { return &v }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
