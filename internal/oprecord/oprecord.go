// Package oprecord is the storage format of op records, shared by the
// middleware (package idem) and the conformance suite that checks what it
// stores. It is not part of the API: the format may change between versions.
package oprecord

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/argsfp"
)

// Collection is the collection op records are stored in.
const Collection = "idem_ops"

// A Record is the stored outcome of one operation, written in the same
// transaction as the change it made.
type Record struct {
	Scope       string `json:"scope"`
	Tool        string `json:"tool"`
	OpID        string `json:"op_id"`
	Fingerprint string `json:"fingerprint"`
	// ArgsHash is set only in records an earlier version wrote: the hex
	// SHA-256 of the handler's decoded arguments as encoding/json wrote
	// them, which a repeat of such a record is compared by (its
	// Fingerprint is of another form). Records now written compare by
	// Fingerprint alone.
	ArgsHash string          `json:"args_hash,omitempty"`
	Result   json.RawMessage `json:"result"` // the *mcp.CallToolResult the handler returned
	// OutputText is the structured content sent with the result, as the
	// JSON text that was sent: kept in a string, so that a backend that
	// reformats stored JSON (PostgreSQL's jsonb) gives it back byte for byte.
	OutputText string `json:"output_text,omitempty"`
	// Output is where records written before OutputText held it.
	Output      json.RawMessage `json:"output,omitempty"`
	CommittedAt time.Time       `json:"committed_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
	// Attempt names the transaction attempt that wrote the record, unique
	// across processes: after a commit of unknown outcome the middleware
	// tells its own commit from another call's by it.
	Attempt string `json:"attempt,omitempty"`

	// The fields below are an outside call's (idem.Guard): its claim is
	// stored before the handler runs, and its answer replaces it.

	// State is "" for a stored answer, Claimed while a handler holds the
	// claim, Unknown once a claim ended without an answer.
	State string `json:"state,omitempty"`
	// Token names the claim's owner: a settle is fenced on it.
	Token string `json:"token,omitempty"`
	// LeaseUntil is when a claim counts as abandoned.
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	// Args are the call's arguments (op_id removed), for reconcile.
	Args json.RawMessage `json:"args,omitempty"`
}

// The states of an outside call's record (Record.State).
const (
	Claimed = "claimed"
	Unknown = "unknown"
)

// EncodeDocument returns r as its stored document: what encoding/json
// writes, written by segmentio's encoder, which the go-sdk already uses
// (FuzzEncodeDocument compares the two). It is 2.4 times as fast for a
// record and makes one allocation instead of three; encoding/json would
// also scan again what a MarshalJSON returned. (A result nested deeper
// than 10,000 levels, which encoding/json refuses to write, it writes; the
// go-sdk reads no result nested deeper than 1,000, so such a result is
// answered once and its replay fails, as one 1,001 deep always did.)
func (r *Record) EncodeDocument() ([]byte, error) { return sjson.Marshal(r) }

// StructuredOutput returns the structured content stored with the result, or
// nil for none.
func (r *Record) StructuredOutput() json.RawMessage {
	switch {
	case r.OutputText != "":
		return json.RawMessage(r.OutputText)
	case len(r.Output) > 0 && string(r.Output) != "null":
		return r.Output
	}
	return nil
}

// Key returns the key of the op record of (scope, tool, opID). Its owner is
// the scope (escaped to a valid owner), so backends that keep an owner's
// documents under the owner keep a user's op records with the user's data;
// its id is a hash of all three, so that even a backend that ignored the
// owner could not give one scope another's record, and any op id fits every
// backend's key rules.
func Key(scope, tool, opID string) backend.Key {
	var buf [256]byte // most keys fit: no allocation but the id's
	b := buf[:0]
	for _, s := range []string{scope, tool, opID} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	return backend.Key{Owner: Owner(scope), Collection: Collection, ID: Hex(argsfp.Sum256(b))}
}

// Hex returns sum in lowercase hex, as hex.EncodeToString does, with one
// allocation instead of two.
func Hex(sum [sha256.Size]byte) string {
	var b [2 * sha256.Size]byte
	hex.Encode(b[:], sum[:])
	return string(b[:])
}

// Owner returns the key owner for a scope: "" for the empty scope, else the
// scope with '%', '/', '~', control characters and bytes of invalid UTF-8
// written as %XX, or, when that is longer than 512 bytes, "~" and the hex
// SHA-256 of the scope. Two scopes never share an owner.
func Owner(scope string) string {
	if scope == "" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(scope); {
		r, size := utf8.DecodeRuneInString(scope[i:])
		if (r == utf8.RuneError && size == 1) || r == '%' || r == '/' || r == '~' || r < 0x20 || r == 0x7f {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{scope[i]})))
			i++
			continue
		}
		b.WriteString(scope[i : i+size])
		i += size
	}
	if b.Len() > 512 {
		sum := sha256.Sum256([]byte(scope))
		return "~" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// Lookup reads the live op record of (scope, tool, opID). It returns
// backend.ErrNotFound when there is none: the operation never committed, or
// its record expired.
func Lookup(ctx context.Context, s backend.Store, scope, tool, opID string) (*Record, error) {
	return Get(ctx, s, Key(scope, tool, opID))
}

// Get reads the live op record at k, in a transaction of its own, as
// Lookup does.
func Get(ctx context.Context, s backend.Store, k backend.Key) (*Record, error) {
	var rec Record
	err := s.Run(ctx, func(ctx context.Context, tx backend.Tx) error {
		_, err := tx.Get(ctx, k, &rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// UsageCollection is the collection of the usage documents, one per scope,
// that bound the bytes of a scope's kept answers (idem.Options.MaxStoredBytes).
const UsageCollection = "idem_usage"

// Usage counts the bytes of the answers one scope keeps, in buckets by when
// they expire, the earliest first.
type Usage struct {
	Buckets []UsageBucket `json:"buckets"`
}

// A UsageBucket is the bytes of answers that have all expired by Until,
// in Unix seconds (a number decodes several times as fast as a time).
type UsageBucket struct {
	Until int64 `json:"until"`
	Bytes int64 `json:"bytes"`
}

// UsageKey returns the key of scope's usage document: kept under the
// scope's owner, as its op records are.
func UsageKey(scope string) backend.Key {
	return backend.Key{Owner: Owner(scope), Collection: UsageCollection, ID: Hex(argsfp.Sum256([]byte("usage\x00" + scope)))}
}
