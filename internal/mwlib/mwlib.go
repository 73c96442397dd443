// Package mwlib is what the conformance suite's middleware cases
// (store/storetest) need of an MCP server library: a server of the library
// with the cases' tools on a store, and ways for a go-sdk client to reach it.
// The cases and their tools' handlers are written once, in no library's
// types; each library registers the handlers through its own idem adapter.
// storetest implements it for the go-sdk (its default), and
// github.com/idemkit/sdk/idem/mcpgo/mcpgotest for mark3labs/mcp-go.
//
// The Guard's cases are written the same way, in internal/guardcases.
package mwlib

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
)

// A Library is an MCP server library the middleware cases run through.
type Library interface {
	// Name names the library in test logs: "go-sdk", "mcp-go".
	Name() string
	// NewServer returns a new server of the library with c's tools,
	// registered through the library's idem adapter. It fails t where a
	// tool cannot be registered.
	NewServer(t *testing.T, c Config) Server
}

// Config is what a server offers.
type Config struct {
	Store idem.Store
	// Options are the server's Guard's settings, but for the scope.
	Options idem.Options
	// Scope, when set, says who an op belongs to, through the library's
	// scope setting; nil leaves the library's default (the authenticated
	// user).
	Scope func(ctx context.Context, r Request) string
	Tools []Tool
	// Status adds get_operation.
	Status bool
	// Arrived, when set, is called as each tools/call reaches the server,
	// before the tool's middleware.
	Arrived func()
}

// A Server is a server of a library, as a go-sdk client reaches it.
type Server interface {
	// Connect returns a client session on a new connection to the server,
	// closed when t ends. When lose names a tool, the server's answer to
	// the connection's first call of that tool is lost: the call runs and
	// commits, and the client sees its connection break.
	Connect(t *testing.T, lose string) *mcp.ClientSession
	// HTTP returns the server over streamable HTTP behind bearer tokens:
	// users maps each token it accepts to the user id of its caller, the
	// scope of op ids on a server without a Scope of its own. Other tokens
	// get 401.
	HTTP(users map[string]string) http.Handler
}

// A Tool is one tool of a server.
type Tool struct {
	Name, Description string
	// InputSchema is the tool's input schema, or nil to infer it from the
	// handler's In.
	InputSchema json.RawMessage
	Options     []idem.Option
	// Handler is a Handler of one of the pairs every library registers:
	// [NoteIn] and [NoteOut], [StatusIn] and StatusIn, [CloseIn] and
	// CloseIn, [BumpIn] and [Counter]. Its generic types must be named in
	// the library's code, hence the short list.
	Handler any
}

// A Handler is a tool handler in no library's types: the library's typed
// handler calls it with the call's request and makes its result from the
// returned one.
type Handler[In, Out any] func(ctx context.Context, tx idem.Tx, r Request, in In) (*ErrorResult, Out, error)

// A Request is a tool call as a handler reads it.
type Request interface {
	// Meta is the call's _meta.
	Meta() map[string]any
	// Resolve is target.Resolve with the call in q, as the library's
	// servers pass it (the request, or whether it is queued).
	Resolve(q target.Query) (string, error)
}

// An ErrorResult is a tool result with isError set, that a handler makes
// itself: Text as its content and, when Code is set, Code in its _meta
// (idem.MetaError).
type ErrorResult struct {
	Text string
	Code idem.Code
}

// NoteIn and NoteOut are a note and where it was written.
type NoteIn struct {
	Text     string `json:"text"`
	Priority int    `json:"priority,omitempty"`
}

type NoteOut struct {
	ID string `json:"id"`
	N  int64  `json:"n"`
}

// StatusIn is a handle's status.
type StatusIn struct {
	Handle string `json:"handle"`
	Status string `json:"status"`
}

// CloseIn names a session to close, or none.
type CloseIn struct {
	SessionID string `json:"session_id,omitempty"`
}

// BumpIn is no arguments.
type BumpIn struct{}

// Counter is one record that many operations change.
type Counter struct {
	N   int      `json:"n"`
	Ops []string `json:"ops"`
}
