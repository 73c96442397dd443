package idemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SendTwice sends the same call twice on cs, as a client that did not get
// the first answer would, and returns both answers. cs may be any session:
// from [Connect], or over HTTP from [HTTPServer.Connect].
func SendTwice(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) (first, second *mcp.CallToolResult, err error) {
	if first, err = cs.CallTool(ctx, params); err != nil {
		return nil, nil, fmt.Errorf("first call: %w", err)
	}
	if second, err = cs.CallTool(ctx, params); err != nil {
		return first, nil, fmt.Errorf("second call: %w", err)
	}
	return first, second, nil
}

// A target is a server the helpers connect clients to and lose answers
// of: an *mcp.Server in process, or an [HTTPServer].
type target interface {
	// connect connects a new client, as a client that reconnects would.
	connect(ctx context.Context) (*mcp.ClientSession, error)
	// loseAnswer sends params over a new connection that loses the answer
	// after the handler ran; an error means the answer was not lost.
	loseAnswer(ctx context.Context, params *mcp.CallToolParams) error
}

// inProcess is an *mcp.Server reached over in-memory transports.
type inProcess struct{ srv *mcp.Server }

func (p inProcess) connect(ctx context.Context) (*mcp.ClientSession, error) {
	return Connect(ctx, p.srv, nil)
}

func (p inProcess) loseAnswer(ctx context.Context, params *mcp.CallToolParams) error {
	d := &Dropper{Tool: params.Name}
	cs, err := Connect(ctx, p.srv, d.Wrap)
	if err != nil {
		return err
	}
	_, callErr := cs.CallTool(ctx, params)
	cs.Close()
	if d.Dropped() != 1 {
		return fmt.Errorf("idemtest: the first answer was not lost (call error: %v)", callErr)
	}
	return nil
}

// DropAndRetry sends params to srv over a connection that loses the answer
// after the handler ran, then reconnects, as a client does, and sends it
// again. It returns the retry's answer. An error means the first answer was
// not lost (the tool failed before it answered, say) or the retry failed.
// [HTTPServer.DropAndRetry] does the same over HTTP.
func DropAndRetry(ctx context.Context, srv *mcp.Server, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return dropAndRetry(ctx, inProcess{srv}, params)
}

func dropAndRetry(ctx context.Context, t target, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if err := t.loseAnswer(ctx, clone(params)); err != nil {
		return nil, err
	}
	cs, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return cs.CallTool(ctx, clone(params))
}

// SameAnswer reports, as an error, how b differs from a in what a caller
// reads: the error flag, the content and the structured content, compared as
// JSON. _meta is not compared (a replay carries io.idemkit/replayed). Two
// identical refusals are the same answer too: check IsError first when a
// test means "the call succeeded twice".
func SameAnswer(a, b *mcp.CallToolResult) error {
	if a == nil || b == nil {
		return errors.New("idemtest: nil result")
	}
	if a.IsError != b.IsError {
		return fmt.Errorf("idemtest: isError %v, then %v", a.IsError, b.IsError)
	}
	for _, part := range []struct {
		name string
		x, y any
	}{{"content", a.Content, b.Content}, {"structuredContent", a.StructuredContent, b.StructuredContent}} {
		jx, err := json.Marshal(part.x)
		if err != nil {
			return fmt.Errorf("idemtest: %s: %w", part.name, err)
		}
		jy, err := json.Marshal(part.y)
		if err != nil {
			return fmt.Errorf("idemtest: %s: %w", part.name, err)
		}
		if !bytes.Equal(jx, jy) {
			return fmt.Errorf("idemtest: %s differs:\n first: %s\nsecond: %s", part.name, jx, jy)
		}
	}
	return nil
}
