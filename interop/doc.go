// Package interop holds tests that drive idemkit's example MCP servers with
// clients other people wrote: the official TypeScript SDK client (v1, and
// the v2 client package) from the Node project in node/, the mcp-go
// client, and the go-sdk's own client on protocol 2026-07-28. Every client
// runs the same scenarios, and the Go tests hold every client to the same
// checks.
//
// Run them with go test ./interop after npm ci in interop/node
// (scripts/test.sh does both).
package interop
