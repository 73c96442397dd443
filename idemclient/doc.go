// Package idemclient sends MCP tool calls for an agent built on the go-sdk
// client, and decides, when the connection is lost while a call waits,
// whether the call may be sent again.
//
//	c := idemclient.New(connect, &idemclient.Options{Trusted: true})
//	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "set_status", Arguments: args})
//	var u *idemclient.UnknownOutcomeError
//	if errors.As(err, &u) {
//		st, _ := c.Reconcile(ctx, u.Tool, u.OpID) // committed or not_committed
//	}
//
// A lost answer does not mean the call failed: the server may have committed
// it. The Client sends a call again, on a new session, only when every
// repeat is harmless by the server's own word and that word may be relied
// on:
//
//   - the server is trusted by configuration ([Options.Trusted]): the MCP
//     specification calls annotations hints that a client must not rely on
//     from an untrusted server;
//   - the tool says idempotentHint: true, or readOnlyHint: true without
//     destructiveHint: true (read-only and destructive conflict, and block);
//   - the tool still says so in the tools/list of the new session: a
//     replacement server that dropped the annotation gets no replay;
//   - fewer than [Options.MaxReplays] replays were sent.
//
// Otherwise the call ends in an [*UnknownOutcomeError] that names the tool,
// the op id and a hash of the arguments, never their values. This is the
// policy observed in Qwen Code 0.24.4 (trusted server, idempotent or
// consistently read-only tool, annotations checked again after rediscovery,
// at most 3 replays); Claude Code 2.1.332 resends once on a new session on
// either hint, without a trust setting, and never after a reset before any
// byte of the answer, which this Client treats as a lost connection too.
//
// Before the first attempt, the Client mints an op id (from crypto/rand) for
// a tool whose input schema has an op_id property, unless the caller sent
// one, and resends it unchanged: a server built with idem answers a repeat
// with the stored result, and its get_operation tool, which Reconcile asks,
// can then tell whether the operation committed.
package idemclient
