package dynamo

import (
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/idemkit/sdk/idem/backend"
)

// ErrConditionFailed: a condition of an item added with [Writes.Add] failed
// on two attempts in a row, so nothing was written. The error wraps the
// native *types.TransactionCanceledException too, whose CancellationReasons
// (in the order of the items: the store's own first, then yours) say which.
var ErrConditionFailed = errors.New("dynamo: the condition of an item added with Writes.Add failed")

var (
	errCommitConflict = fmt.Errorf("%w: a document read or written changed before commit", backend.ErrConflict)
	errReadsChanged   = fmt.Errorf("%w: a document fn read changed before it returned", backend.ErrConflict)
	// errLiveDocument: a Create at commit found a live document; the next
	// attempt reads it, so it goes at once.
	errLiveDocument = fmt.Errorf("%w: a Create at commit found a live document", backend.ErrConflict)
	// errThrottled: DynamoDB refused the request for capacity, after the
	// SDK's own retries; nothing was applied and Run tries again.
	errThrottled = errors.New("dynamo: throttled")
)

// throttled reports whether err is DynamoDB refusing a request for
// capacity.
func throttled(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
		return true
	}
	return false
}

// readError maps an error of a read of k.
func readError(k backend.Key, err error) error {
	if throttled(err) {
		return fmt.Errorf("%w: reading %s: %w", errThrottled, k, err)
	}
	return fmt.Errorf("dynamo: reading %s: %w", k, err)
}

// requestError maps an error of a TransactWriteItems that DynamoDB did not
// answer with a cancellation. The outcome is unknown when the request may
// have reached DynamoDB and no definite answer came back: a connection lost
// after the dial, a response that could not be read, a 5xx, or the same
// token still in progress.
func requestError(err error) error {
	if throttled(err) {
		return fmt.Errorf("%w: %w", errThrottled, err)
	}
	var inProgress *types.TransactionInProgressException
	if errors.As(err, &inProgress) {
		return unknown(err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("dynamo: commit not sent: %w", err)
	}
	// Checked before the status: the SDK wraps a failed send in a
	// ResponseError with no status.
	var send *smithyhttp.RequestSendError
	var des *smithy.DeserializationError
	if errors.As(err, &send) || errors.As(err, &des) {
		return unknown(err)
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		if re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == 0 {
			return unknown(err)
		}
		return fmt.Errorf("dynamo: commit refused: %w", err)
	}
	return fmt.Errorf("dynamo: commit: %w", err)
}

func unknown(err error) error {
	return fmt.Errorf("dynamo: %w: TransactWriteItems: %w", backend.ErrUnknownOutcome, err)
}
