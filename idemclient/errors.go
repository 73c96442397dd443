package idemclient

import (
	"errors"
	"fmt"
	"net"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An UnknownOutcomeError says a call was sent, its answer was lost, and it
// was not sent again: it may have committed. Do not send it again under a
// new op id; ask [Client.Reconcile] (or check the target's state) first,
// as Qwen Code tells its model: "verify the outcome before trying again".
//
// Its message names the tool, why the call was not sent again and the
// argument fingerprint; it holds no argument value and not the transport's error,
// which Unwrap returns.
type UnknownOutcomeError struct {
	Tool string
	// OpID is the op id the call carried, minted or the caller's; "" when
	// the tool takes none and the caller sent none.
	OpID string
	// Fingerprint is the arguments' fingerprint, the one the server's op
	// record and log record hold for the call: the hex SHA-256 of the
	// arguments as sent, less op_id, written by encoding/json (members
	// sorted). It tells two calls apart in a log without quoting them. (It
	// hides nothing an attacker could guess.)
	Fingerprint string
	// Sends is how many times the call was sent.
	Sends int
	// Reason says why it was not sent again.
	Reason string
	// Err is the error of the last attempt (and of the reconnect, if that
	// failed).
	Err error
}

func (e *UnknownOutcomeError) Error() string {
	op := "no op id"
	if e.OpID != "" {
		op = "an op id to reconcile with"
	}
	return fmt.Sprintf("idemclient: tool %q may have run: its answer was lost (%d attempt(s), %s, argument fingerprint %s), and it was not sent again: %s; check whether it ran before running it again",
		e.Tool, e.Sends, op, e.Fingerprint, e.Reason)
}

func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// rejected is the go-sdk's JSON-RPC code for a request its transport
// reports as not accepted; its HTTP transport also uses it when the
// connection failed after the request was written, so it is not an answer.
const rejected = -32005

// lostConnection reports whether err, from a call whose context is still
// live, may have come after the server received the call: the connection
// closed, was reset, or the answer's stream ended early. A JSON-RPC error
// from the server is an answer, and a failure to reach the server means
// the call was never sent.
func lostConnection(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != rejected {
		return false
	}
	return true
}
