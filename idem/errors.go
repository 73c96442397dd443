package idem

import (
	"errors"
	"fmt"
)

// A Code classifies an [Error]. Every error an idemkit tool returns is a tool
// result with isError set, its code in _meta["io.idemkit/error"] and words
// that say what to do; each code has one thing the caller should do about it
// (docs/clients.md).
type Code string

const (
	// CodeMissingKey: a record-key argument is absent, null or empty. Send
	// it; the message names it.
	CodeMissingKey Code = "missing_key"
	// CodeKeyReused: the op id was used before with other arguments. Mint a
	// new op id for a new operation.
	CodeKeyReused Code = "key_reused"
	// CodeBusy: a call with the same op id is still running. Retry later
	// with the same op id: the retry gets that call's result.
	CodeBusy Code = "busy"
	// CodeContended: the write lost too many races with concurrent writes
	// and nothing was saved. Retry with the same arguments (and op id).
	CodeContended Code = "contended"
	// CodeUnknownOutcome: the server cannot tell whether the operation
	// committed. Call get_operation with the op id before retrying.
	CodeUnknownOutcome Code = "unknown_outcome"
	// CodeInvalidOpID: the op id is not a string of 1..128 printable ASCII
	// characters, the argument and _meta carry different ones, or the tool
	// requires one and none was sent.
	CodeInvalidOpID Code = "invalid_op_id"
	// CodeInvalidArguments: the arguments do not match the tool's input
	// schema. The message names the argument and what was expected, never
	// the value; nothing ran.
	CodeInvalidArguments Code = "invalid_arguments"
	// CodeScopeRequired: the tool needs an authenticated caller.
	CodeScopeRequired Code = "scope_required"
	// CodeQuotaExceeded: the caller's kept answers have reached the
	// server's bound (Options.MaxStoredBytes) and nothing ran. Retry after
	// the time the message gives, when older answers have expired.
	CodeQuotaExceeded Code = "quota_exceeded"
	// CodeNotSaved: the tool's handler reported an error and its transaction
	// rolled back: nothing was saved. The message is the handler's own.
	CodeNotSaved Code = "not_saved"
	// CodeInternal: anything else; the server logged it, and the message
	// says whether anything was saved.
	CodeInternal Code = "internal"
)

// Error is the error the middleware reports to callers, and that a handler
// returns to refuse a call with a code of its own choosing:
//
//	return nil, out, &idem.Error{Code: target.CodeEventBeforeStart, Message: "the stop is before the session began"}
//
// Its Message is sent to the caller: it must never hold argument values.
type Error struct {
	Code    Code
	Message string
	// Candidates lists the records a caller may mean, for the
	// ambiguous_target refusal of package idem/target.
	Candidates []Candidate
	// OpID is the op id the error is about, for CodeUnknownOutcome and
	// CodeBusy. The caller sent it, so it is not a leak.
	OpID string
}

// A Candidate is one record a close or delete without an id could mean.
type Candidate struct {
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "idem: " + string(e.Code)
	}
	return fmt.Sprintf("idem: %s: %s", e.Code, e.Message)
}

func newError(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }

// CodeOf returns the code of the first *Error in err's chain, or
// CodeInternal if there is none. CodeOf(nil) is "".
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
