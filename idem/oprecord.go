package idem

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/internal/oprecord"
)

var (
	attemptPrefix = strconv.FormatUint(rand.Uint64(), 36) // this process
	attemptSeq    atomic.Uint64
)

// newAttemptID returns an id no other attempt, in this process or another,
// has: a random per-process prefix and a counter.
func newAttemptID() string {
	return attemptPrefix + "." + strconv.FormatUint(attemptSeq.Add(1), 36)
}

// decodeResult returns a fresh copy of the stored result.
func decodeResult(r *oprecord.Record) (*mcp.CallToolResult, error) {
	res := &mcp.CallToolResult{}
	if len(r.Result) == 0 || string(r.Result) == "null" {
		return res, nil
	}
	// The SDK's own decoder, called directly: json.Unmarshal would first
	// scan the whole result to validate it, which the decoder does anyway.
	if err := res.UnmarshalJSON(r.Result); err != nil {
		return nil, errors.New("idem: stored result cannot be decoded")
	}
	// The text copy of the output is made only for a nil Content, and the
	// SDK decodes "content": null as an empty slice: give the replay the nil
	// the handler returned, so it is filled the same way.
	if len(res.Content) > 0 {
		return res, nil
	}
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(r.Result, &probe) == nil && (len(probe.Content) == 0 || string(probe.Content) == "null") {
		res.Content = nil
	}
	return res, nil
}
