package idem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OpCollection is the collection op records are stored in.
const OpCollection = "idem_ops"

// An OpRecord is the stored outcome of one operation, written in the same
// transaction as the change it made.
type OpRecord struct {
	Scope       string `json:"scope"`
	Tool        string `json:"tool"`
	OpID        string `json:"op_id"`
	Fingerprint string `json:"fingerprint"`
	// ArgsHash is the hex SHA-256 of the arguments as encoding/json wrote
	// them: a repeat whose encoding is the same byte for byte matches
	// without computing its fingerprint. Any other is compared by
	// fingerprint.
	ArgsHash    string          `json:"args_hash,omitempty"`
	Result      json.RawMessage `json:"result"`           // the *mcp.CallToolResult the handler returned
	Output      json.RawMessage `json:"output,omitempty"` // the handler's typed output
	CommittedAt time.Time       `json:"committed_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
	// Attempt names the transaction attempt that wrote the record, unique
	// across processes: after a commit of unknown outcome the middleware
	// tells its own commit from another call's by it.
	Attempt string `json:"attempt,omitempty"`
}

var (
	attemptPrefix = strconv.FormatUint(rand.Uint64(), 36) // this process
	attemptSeq    atomic.Uint64
)

// newAttemptID returns an id no other attempt, in this process or another,
// has: a random per-process prefix and a counter.
func newAttemptID() string {
	return attemptPrefix + "." + strconv.FormatUint(attemptSeq.Add(1), 36)
}

// opAnswer is the part of an op record a replay needs: decoding only it
// skips the rest of the record.
type opAnswer struct {
	Fingerprint string          `json:"fingerprint"`
	ArgsHash    string          `json:"args_hash"`
	Result      json.RawMessage `json:"result"`
	Output      json.RawMessage `json:"output,omitempty"`
}

func (a *opAnswer) record() *OpRecord {
	return &OpRecord{Fingerprint: a.Fingerprint, ArgsHash: a.ArgsHash, Result: a.Result, Output: a.Output}
}

// OpKey returns the key of the op record of (scope, tool, opID). The id is a
// hash of the three, so any op id fits every backend's key rules.
func OpKey(scope, tool, opID string) Key {
	h := sha256.New()
	for _, s := range []string{scope, tool, opID} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return Key{Collection: OpCollection, ID: hex.EncodeToString(h.Sum(nil))}
}

// LookupOp reads the live op record of (scope, tool, opID). It returns
// ErrNotFound when there is none: the operation never committed, or its
// record expired.
func LookupOp(ctx context.Context, s Store, scope, tool, opID string) (*OpRecord, error) {
	var rec OpRecord
	err := s.Run(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.Get(ctx, OpKey(scope, tool, opID), &rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// decodeResult returns a fresh copy of the stored result.
func (r *OpRecord) decodeResult() (*mcp.CallToolResult, error) {
	res := &mcp.CallToolResult{}
	if len(r.Result) == 0 || string(r.Result) == "null" {
		return res, nil
	}
	// The SDK's own decoder, called directly: json.Unmarshal would first
	// scan the whole result to validate it, which the decoder does anyway.
	if err := res.UnmarshalJSON(r.Result); err != nil {
		return nil, errors.New("idem: stored result cannot be decoded")
	}
	// The SDK fills the text fallback of a typed output only into a nil
	// Content, and decodes "content": null as an empty slice: give the
	// replay the nil the handler returned, so it is filled the same way.
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
