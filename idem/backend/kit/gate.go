package kit

import (
	"errors"
	"sync/atomic"

	"github.com/idemkit/sdk/idem/backend"
)

var errDone = errors.New("idem: transaction used after Run returned")

// A Gate holds the checks every Tx method makes before it touches the
// store: that fn has not returned, that the key is valid, and, for a write,
// that the document encodes within the store's limit. The zero Gate is
// open; it is safe to Close and check from several goroutines (a native
// handle fn kept may be used after fn returned).
type Gate struct {
	closed atomic.Bool
}

// Close closes g: from now on every check fails.
func (g *Gate) Close() { g.closed.Store(true) }

// Closed reports whether g is closed.
func (g *Gate) Closed() bool { return g.closed.Load() }

// Err returns an error once g is closed, and nil before.
func (g *Gate) Err() error {
	if g.closed.Load() {
		return errDone
	}
	return nil
}

// Check returns g.Err, or else k's [backend.Key.Validate] error.
func (g *Gate) Check(k backend.Key) error {
	if g.closed.Load() {
		return errDone
	}
	return k.Validate()
}

// CheckWrite is Check, and then doc encoded by [backend.EncodeDocument]
// within maxBytes.
func (g *Gate) CheckWrite(k backend.Key, doc any, maxBytes int) ([]byte, error) {
	if err := g.Check(k); err != nil {
		return nil, err
	}
	return backend.EncodeDocument(doc, maxBytes)
}
