package idemclient

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/internal/argsfp"
)

// opIDArgument is the argument that carries an op id, and metaOpID the
// _meta key an idem server also reads it from.
const (
	opIDArgument = "op_id"
	metaOpID     = "io.idemkit/op_id"
)

// Options configure a Client. The zero value, like a nil *Options, trusts
// no server: no call is sent twice.
type Options struct {
	// Trusted says the server was reviewed and its tool annotations may
	// decide whether a lost call is sent again. Without it no call is.
	Trusted bool
	// MaxReplays bounds how many times one call is sent again after lost
	// connections; 0 or less means 1 (Claude Code sends once more, Qwen Code
	// up to 3 times).
	MaxReplays int
}

// A Client sends tool calls on a session it opens with its connect
// function, and opens a new one after the connection is lost. It is safe
// for concurrent use.
type Client struct {
	connect    func(context.Context) (*mcp.ClientSession, error)
	trusted    bool
	maxReplays int

	mu    sync.Mutex           // guards cs and tools
	cs    *mcp.ClientSession   // the current session; nil before the first call and after a loss
	tools map[string]*mcp.Tool // cs's tools/list, by name
}

// New returns a Client that opens sessions with connect: once before the
// first call, and again each time it sends a call again after a lost
// connection. opts may be nil.
func New(connect func(context.Context) (*mcp.ClientSession, error), opts *Options) *Client {
	c := &Client{connect: connect, maxReplays: 1}
	if opts != nil {
		c.trusted = opts.Trusted
		c.maxReplays = max(opts.MaxReplays, 1)
	}
	return c
}

// Close closes the current session, if any.
func (c *Client) Close() error {
	c.mu.Lock()
	cs := c.cs
	c.cs, c.tools = nil, nil
	c.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.Close()
}

// session returns the current session and its tools, connecting and
// listing the tools when there is none.
func (c *Client) session(ctx context.Context) (*mcp.ClientSession, map[string]*mcp.Tool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != nil {
		return c.cs, c.tools, nil
	}
	cs, err := c.connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("idemclient: connecting: %w", err)
	}
	tools := map[string]*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			cs.Close()
			return nil, nil, fmt.Errorf("idemclient: listing tools: %w", err)
		}
		tools[t.Name] = t
	}
	c.cs, c.tools = cs, tools
	return cs, tools, nil
}

// forget drops cs after its connection was lost, so that the next call
// opens a new session.
func (c *Client) forget(cs *mcp.ClientSession) {
	c.mu.Lock()
	if c.cs == cs {
		c.cs, c.tools = nil, nil
	}
	c.mu.Unlock()
	cs.Close()
}

// CallTool sends params and returns the server's answer; a result with
// IsError set is an answer too. params is not modified.
//
// When the tool's input schema has an op_id property and params carries no
// op id (neither the op_id argument nor _meta["io.idemkit/op_id"]), one is
// minted and sent with every attempt.
//
// When the connection is lost while the call waits (the transport closed,
// a reset, a stream cut short), the call may have committed. It is sent
// again on a new session only under the rules of the package doc; otherwise
// CallTool returns an *UnknownOutcomeError, as it does when ctx ends while
// the call waits. Errors that say the call was never sent (the server could
// not be reached) and JSON-RPC errors from the server are returned as they
// are.
func (c *Client) CallTool(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if params == nil || params.Name == "" {
		return nil, errors.New("idemclient: CallTool needs a tool name")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, tools, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	tool := tools[params.Name]
	send, opID, err := prepare(params, tool)
	if err != nil {
		return nil, err
	}
	unknown := &UnknownOutcomeError{Tool: params.Name, OpID: opID, Fingerprint: fingerprint(send.Arguments)}
	safe, why := replayable(tool)
	for {
		// The go-sdk writes session details into _meta: every attempt
		// gets its own copy of the caller's.
		attempt := *send
		attempt.Meta = maps.Clone(params.Meta)
		res, err := cs.CallTool(ctx, &attempt)
		unknown.Sends++
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			unknown.Reason, unknown.Err = "the call was cancelled or timed out while it waited", err
			return nil, unknown
		}
		if !lostConnection(err) {
			return nil, err
		}
		c.forget(cs)
		unknown.Err = err
		switch {
		case !c.trusted:
			unknown.Reason = "the server is not trusted"
			return nil, unknown
		case !safe:
			unknown.Reason = why
			return nil, unknown
		case unknown.Sends > c.maxReplays:
			unknown.Reason = fmt.Sprintf("it was sent %d times and every answer was lost", unknown.Sends)
			return nil, unknown
		}
		cs, tools, err = c.session(ctx)
		if err != nil {
			unknown.Reason, unknown.Err = "reconnecting failed", errors.Join(unknown.Err, err)
			return nil, unknown
		}
		// The annotations that allowed the replay must still hold on the
		// new session: a server replaced during the reconnect may say
		// otherwise.
		if ok, why := replayable(tools[params.Name]); !ok {
			unknown.Reason = "after reconnecting: " + why
			return nil, unknown
		}
	}
}

// replayable reports whether t's annotations say every repeat is
// harmless, and if not, why (without values).
func replayable(t *mcp.Tool) (bool, string) {
	switch {
	case t == nil:
		return false, "the server does not list the tool"
	case t.Annotations == nil:
		return false, "the tool has no annotations"
	}
	a := t.Annotations
	destructive := a.DestructiveHint != nil && *a.DestructiveHint
	switch {
	case a.ReadOnlyHint && destructive:
		return false, "the tool's annotations conflict: read-only and destructive"
	case a.ReadOnlyHint, a.IdempotentHint:
		return true, ""
	}
	return false, "the tool declares neither idempotentHint nor readOnlyHint"
}

// prepare returns the call to send for params (a copy, with a minted op id
// when tool takes one and params has none) and the op id it carries.
func prepare(params *mcp.CallToolParams, tool *mcp.Tool) (*mcp.CallToolParams, string, error) {
	send := *params
	raw, err := json.Marshal(params.Arguments)
	if err != nil {
		return nil, "", fmt.Errorf("idemclient: the arguments cannot be encoded: %w", err)
	}
	args := map[string]json.RawMessage{}
	if string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, "", errors.New("idemclient: the arguments are not a JSON object")
		}
	}
	send.Arguments = args
	var opID string
	if v, ok := args[opIDArgument]; ok {
		_ = json.Unmarshal(v, &opID) // a malformed one is the server's to refuse
	}
	if m, ok := params.Meta[metaOpID].(string); ok && opID == "" {
		opID = m
	}
	if opID == "" && takesOpID(tool) && args[opIDArgument] == nil {
		opID = rand.Text()
		args[opIDArgument], _ = json.Marshal(opID)
	}
	return &send, opID, nil
}

// takesOpID reports whether t's input schema has an op_id property.
func takesOpID(t *mcp.Tool) bool {
	if t == nil || t.InputSchema == nil {
		return false
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return false
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	return json.Unmarshal(raw, &s) == nil && s.Properties[opIDArgument] != nil
}

// fingerprint is the fingerprint of args, the one the server stores and
// logs (package internal/argsfp); "" for arguments that have none.
func fingerprint(args any) string {
	fp, _ := argsfp.OfValue(args)
	return fp
}
