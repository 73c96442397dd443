package idem

import (
	"errors"
	"fmt"
)

// A Code classifies an [Error]. Each code is sent to the caller in
// _meta["io.idemkit/error"] of the tool result, and each has one thing the
// caller should do about it.
type Code string

const (
	// CodeMissingKey: a record-key argument is absent or empty. Send it.
	CodeMissingKey Code = "missing_key"
	// CodeAmbiguousTarget: a close or delete named no record and the server
	// would not guess. Pick one of the candidates and send its id.
	CodeAmbiguousTarget Code = "ambiguous_target"
	// CodeKeyReused: the op id was used before with other arguments. Mint a
	// new op id for a new operation.
	CodeKeyReused Code = "key_reused"
	// CodeBusy: the same operation is still running. Retry later with the
	// same op id.
	CodeBusy Code = "busy"
	// CodeUnknownOutcome: the server cannot tell whether the operation
	// committed. Call get_operation with the op id before retrying.
	CodeUnknownOutcome Code = "unknown_outcome"
	// CodeEventBeforeStart: an event's timestamp is before the record began.
	CodeEventBeforeStart Code = "event_before_start"
	// CodeInvalidOpID: the op id is not 1..128 printable ASCII characters, or
	// the argument and _meta carry different ones.
	CodeInvalidOpID Code = "invalid_op_id"
	// CodeScopeRequired: the tool needs an authenticated caller.
	CodeScopeRequired Code = "scope_required"
	// CodeInternal: anything else; the server logged it.
	CodeInternal Code = "internal"
)

// Error is the error the middleware reports to callers. Its Message is safe
// to show a caller: it never holds argument values.
type Error struct {
	Code    Code
	Message string
	// Candidates lists the records a caller may mean, for
	// CodeAmbiguousTarget.
	Candidates []Candidate
	// OpID is the op id the error is about, for CodeUnknownOutcome and
	// CodeBusy. The caller sent it, so it is not a leak.
	OpID string
	err  error
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

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.err }

// NewError returns an *Error with the given code and message. The message
// must not hold argument values.
func NewError(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }

func wrapError(c Code, msg string, err error) *Error {
	return &Error{Code: c, Message: msg, err: err}
}

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
