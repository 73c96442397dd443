package interop_test

import (
	"errors"
	"slices"
	"testing"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// TestMCPGoDefaultClientOverStatefulHTTP documents what mcp-go v1.2.1's
// default client gets from a go-sdk server behind a stateful streamable
// handler (mcp.NewStreamableHTTPHandler with nil options; the types server
// without -stateless), and that the pinned protocol docs/clients.md gives
// mcp-go users works there.
//
// The client opens with server/discover at 2026-07-28. The stateful handler
// answers it, listing only the versions before 2026-07-28 in
// supportedVersions, and mcp-go takes any answer as a modern server: it
// keeps 2026-07-28 without reading supportedVersions. Every later request
// is then refused with -32022 (unsupported protocol version), and the
// client never falls back to initialize, which the handler would accept.
//
// The test passes when the default client works, or when it fails in
// exactly that way; anything else is a new behaviour to document.
func TestMCPGoDefaultClientOverStatefulHTTP(t *testing.T) {
	ctx := testContext(t)
	tg := newTarget(t, "http", bins.types)
	cl, err := mcpGoClient{}.connect(ctx, tg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cl.Close()
	_, err = cl.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err == nil {
		t.Logf("mcp-go's default client lists tools over stateful HTTP (protocol %s): the docs need no workaround for it any more", cl.ProtocolVersion())
		return
	}
	var unsupported mcpgo.UnsupportedProtocolVersionError
	if !errors.As(err, &unsupported) {
		t.Fatalf("tools/list: %v; want it to work, or the documented unsupported-protocol-version refusal", err)
	}
	if cl.ProtocolVersion() != mcpgo.LATEST_PROTOCOL_VERSION || slices.Contains(unsupported.Supported, cl.ProtocolVersion()) {
		t.Fatalf("client on %s refused with %v: not the documented failure", cl.ProtocolVersion(), err)
	}
	t.Logf("documented failure: connected on %s after server/discover, then tools/list refused: %v", cl.ProtocolVersion(), err)

	// The same client pinned to the last protocol with the initialize
	// handshake works against the same handler.
	pinned, err := mcpGoClient{opts: []mcpgoclient.ClientOption{
		mcpgoclient.WithProtocolVersion(mcpgo.LATEST_LEGACY_PROTOCOL_VERSION)}}.connect(ctx, tg)
	if err != nil {
		t.Fatalf("pinned client: connect: %v", err)
	}
	defer pinned.Close()
	if _, err := pinned.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
		t.Fatalf("pinned client: tools/list: %v", err)
	}
}

// TestV2AutoNegotiationStatefulHTTP runs the types server's scenarios with
// the TypeScript v2 client in auto version negotiation (server/discover
// first, as mcp-go does) against a stateful handler: unlike mcp-go, it falls
// back to the initialize handshake.
func TestV2AutoNegotiationStatefulHTTP(t *testing.T) {
	needNode(t)
	tg := newTarget(t, "http", bins.types)
	out, err := nodeClient{sdk: "v2", negotiation: "auto"}.run(testContext(t), tg, typesPlan())
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range typesChecks {
		t.Run(ch.name, func(t *testing.T) { ch.fn(t, out) })
	}
}
