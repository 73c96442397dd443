package canary

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemclient"
)

// connectFunc opens a new session to the canary run of a case.
type connectFunc = func(context.Context) (*mcp.ClientSession, error)

// outcome is what a policy got from one call.
type outcome struct {
	res *mcp.CallToolResult
	err error
	// reconciled is get_operation's answer after an unknown outcome with
	// an op id, or "".
	reconciled idemclient.Status
}

// A Policy is how a client decides to send a call again after its answer
// was lost.
type Policy struct {
	Name        string
	Description string
	call        func(ctx context.Context, connect connectFunc, trusted bool, p *mcp.CallToolParams) outcome
}

// Policies are the client policies the matrix can run: the first is the
// default.
var Policies = []Policy{
	{
		Name:        "safe",
		Description: "idemclient: send again only when the server is trusted and the tool, listed again after reconnecting, says idempotentHint or readOnlyHint; once; else unknown outcome, reconciled with get_operation",
		call:        safeRetry,
	},
	{
		Name:        "always",
		Description: "naive: reconnect and send the same call again after any error, up to 3 times, whatever the hints",
		call:        alwaysRetry,
	},
	{
		Name:        "never",
		Description: "never send again: the error goes back as it is",
		call:        neverRetry,
	},
}

// PolicyNamed returns the policy called name.
func PolicyNamed(name string) (Policy, error) {
	for _, p := range Policies {
		if p.Name == name {
			return p, nil
		}
	}
	return Policy{}, errors.New("unknown policy: want safe, always or never")
}

func safeRetry(ctx context.Context, connect connectFunc, trusted bool, p *mcp.CallToolParams) outcome {
	c := idemclient.New(connect, &idemclient.Options{Trusted: trusted})
	defer c.Close()
	res, err := c.CallTool(ctx, p)
	out := outcome{res: res, err: err}
	var u *idemclient.UnknownOutcomeError
	if errors.As(err, &u) && u.OpID != "" {
		st, rerr := c.Reconcile(ctx, u.Tool, u.OpID)
		if rerr == nil {
			out.reconciled = st
		}
	}
	return out
}

func alwaysRetry(ctx context.Context, connect connectFunc, _ bool, p *mcp.CallToolParams) outcome {
	var res *mcp.CallToolResult
	var err error
	for range 4 {
		var cs *mcp.ClientSession
		if cs, err = connect(ctx); err != nil {
			continue
		}
		res, err = cs.CallTool(ctx, p)
		cs.Close()
		if err == nil {
			break
		}
	}
	return outcome{res: res, err: err}
}

func neverRetry(ctx context.Context, connect connectFunc, _ bool, p *mcp.CallToolParams) outcome {
	cs, err := connect(ctx)
	if err != nil {
		return outcome{err: fmt.Errorf("connecting: %w", err)}
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, p)
	return outcome{res: res, err: err}
}
