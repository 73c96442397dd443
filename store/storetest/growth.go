package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/testenv"
)

// GrowthCalls is how many first calls the stores' growth tests make
// with FillOpRecords.
const GrowthCalls = 300

// GrowthLabel is the size in bytes of the label each call of the growth
// run sends: 64 KiB, or the value of IDEMKIT_GROWTH_LABEL (409600 for a
// label of 400 KB).
func GrowthLabel(t testing.TB) int {
	t.Helper()
	return testenv.Count(t, "IDEMKIT_GROWTH_LABEL", 64<<10)
}

type labelIn struct {
	Label string `json:"label"`
}

type labelOut struct {
	Label string `json:"label"`
}

// FillOpRecords makes n first calls of a tool served on s through the idem
// middleware (idem.RequireOpID, idem.TTL(ttl), idem.Clock(now)), each with
// an op id of its own and a label of size bytes that the tool answers back,
// as a client that sends a new op id with every call would. Each call
// leaves an op record that holds its answer (the label twice: text and
// structured content) and expires at now()+ttl. The growth tests of the
// stores that sweep measure the store before, after, and once their
// background sweep has deleted the expired records (docs/stores.md).
func FillOpRecords(t *testing.T, s idem.Store, now func() time.Time, ttl time.Duration, n, size int) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "growth", Version: "v0"}, nil)
	guard := idem.New(s, &idem.Options{TTL: ttl, Now: now})
	idem.AddTool(srv, &mcp.Tool{Name: "label"}, guard,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in labelIn) (*mcp.CallToolResult, labelOut, error) {
			return nil, labelOut(in), nil
		}, idem.RequireOpID())
	cs := connectTo(t, srv, nil)
	label := strings.Repeat("x", size)
	for i := range n {
		res := callTool(t, cs, "label", map[string]any{"label": label, "op_id": fmt.Sprintf("growth-%d-%d", time.Now().UnixNano(), i)}, nil)
		if res.IsError {
			t.Fatalf("call %d: %s", i, resultText(res))
		}
	}
}
