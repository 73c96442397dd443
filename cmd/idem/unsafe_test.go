package main

import (
	"context"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// unsafeTools are what the audit must say of each tool of the unsafe test
// server: its class and the codes of its findings, in order.
var unsafeTools = map[string]struct {
	class class
	codes []string
}{
	"append_entry": {classUnknown, []string{"no_hints", "description_silent"}},
	"record_event": {classConflicting, []string{"optional_op_id"}},
	"purge_cache":  {classConflicting, []string{"read_only_destructive"}},
	"tag_item":     {classIdempotent, []string{"boolean_subschema"}},
	"send_note":    {classNonIdempotent, []string{"not_idempotent", "description_silent"}},
	"add_points":   {classIdempotent, []string{"op_id_only"}},
	"set_label":    {classIdempotent, nil},
	"lookup":       {classReadOnly, nil},
}

// newUnsafeServer returns a server whose tools make every mistake the
// audit looks for, beside two that are fine (set_label, lookup), and a
// count of the tool calls it answered (the audit must make none).
func newUnsafeServer() (*mcp.Server, *atomic.Int64) {
	// Two tools a page: the audit must follow the cursor to see them all.
	srv := mcp.NewServer(&mcp.Implementation{Name: "unsafe-test-server", Version: "v0"}, &mcp.ServerOptions{PageSize: 2})
	calls := &atomic.Int64{}
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	object := func(props map[string]any, required ...string) map[string]any {
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	yes := true
	no := false
	tools := []*mcp.Tool{
		{ // no annotations at all
			Name: "append_entry", Description: "Append an entry to the log.",
			InputSchema: object(map[string]any{"text": str("the entry")}, "text"),
		},
		{ // idempotent only when the optional op id is sent
			Name: "record_event", Description: "Record an event. Send an op_id to make a retry safe.",
			InputSchema: object(map[string]any{"what": str("the event"), "op_id": str("an op id, optional")}, "what"),
			Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
		},
		{ // read-only and destructive at once
			Name: "purge_cache", Description: "Empty the cache.",
			InputSchema: object(map[string]any{}),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes},
		},
		{ // keyed and idempotent, but with a boolean subschema
			Name: "tag_item", Description: "Tag an item; calls with the same item key write the same record.",
			InputSchema: object(map[string]any{"item": str("record key of the item"), "extra": true}, "item"),
			Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
		},
		{ // says it is a write, not that it is idempotent
			Name: "send_note", Description: "Send a note to the team.",
			InputSchema: object(map[string]any{"text": str("the note")}, "text"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &no},
		},
		{ // idempotent for an app that keeps its op id, not for a model's retry
			Name: "add_points", Description: "Add points to the score. Send an op_id; resend it on a retry.",
			InputSchema: object(map[string]any{"points": map[string]any{"type": "integer"}, "op_id": str("the op id")}, "points", "op_id"),
			Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
		},
		{ // fine: keyed, idempotent, says so
			Name: "set_label", Description: "Set the label of an item: calls with the same item key write the same record.",
			InputSchema: object(map[string]any{"item": str("record key of the item"), "label": str("the label")}, "item", "label"),
			Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
		},
		{ // fine: read-only
			Name: "lookup", Description: "Look up an item.",
			InputSchema: object(map[string]any{"item": str("the item")}, "item"),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		},
	}
	for _, t := range tools {
		srv.AddTool(t, handler)
	}
	return srv, calls
}
