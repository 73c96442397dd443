// Package idem makes MCP tool handlers safe to call twice.
//
// A tool call whose response is lost after the server committed is sent
// again: by a model, by an agent that reconnects, by an app that was offline.
// Wrap the handler, and the write lands once:
//
//	store, _ := sqlite.Open("app.db", nil) // or memory.New(nil), postgres.New(pool, nil)
//	guard := idem.New(store, nil)         // once per server: TTL, scope, logger, tracer
//	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
//	idem.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note."}, guard,
//		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
//			id := newID() // server-made: a second run would add a second note
//			return nil, Added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
//		}, idem.RequireOpID())
//	idem.RegisterStatusTool(srv, guard) // get_operation, for unknown outcomes
//
// Two kinds of callers, two kinds of keys:
//
//   - A model already has the id of the record it writes (a session id, a
//     slug, a date). Name those arguments with [RecordKeys] and write with
//     Tx.Create (create-if-absent) or Tx.Put (replace-by-key): the repeat
//     writes the same record.
//   - An app mints an op id before its first attempt and resends it on
//     retries ([RequireOpID], or [OpID] when it is optional; the op_id
//     argument or _meta["io.idemkit/op_id"]). The op id and the handler's
//     result are stored in the same transaction as its writes, for a TTL; a
//     repeat gets the stored result with _meta["io.idemkit/replayed"] = true
//     and nothing it does is kept.
//
// [AddTool] keeps the tool's metadata honest: idempotentHint only where every
// repeat of the same arguments has no further effect (keys, or a required op
// id; an optional op id is not enough), descriptions that say which
// arguments are keys and who mints op_id, and schemas that strict clients
// accept. Every error an idemkit tool returns is a tool result with isError
// set, a [Code] in _meta["io.idemkit/error"] and words that say what to do;
// it never quotes argument values.
//
// Everything is written through [Store] and [Tx], one small transactional
// document contract (package idem/backend) implemented by store/memory,
// store/sqlite, store/postgres, store/dynamo and store/firestore and checked
// by store/storetest. [AfterCommit] runs outbound effects after a real
// commit only (see package sideeffect). Package idem/target keeps an
// event's own timestamp and refuses to guess which record a close or
// delete without an id means.
//
// A server whose tools exist already, and whose writes go to an outside
// API, keeps its handlers and adds one line: [Guard.Middleware]. A server
// on mark3labs/mcp-go uses the module github.com/idemkit/sdk/idem/mcpgo,
// the same middleware with mcp-go's types.
package idem
