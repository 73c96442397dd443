package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/idemkit/sdk/internal/argsfp"
	"github.com/idemkit/sdk/internal/oprecord"
)

// recentOps remembers the op keys a wrapped handler answered lately (a
// commit, a replay, an unknown outcome), up to a fixed number, forgetting the
// oldest first. A call whose op key is here reads the op record before its
// transaction, since a repeat is likely; any other call skips that read and
// lets the op record's create at commit catch a duplicate (see
// call.runOp).
//
// With a key it may hold the fingerprint of the arguments that were sent
// with it, under the SHA-256 of those arguments as sent: a repeat that sends
// the same bytes has that fingerprint, without decoding and writing its
// arguments again (see tool.replay).
type recentOps struct {
	mu   sync.Mutex // guards the fields below
	set  map[string]recentArgs
	ring []string // insertion order; len(ring) <= size
	next int      // index in ring of the oldest entry once ring is full
	size int
}

// recentArgs is what a key's entry knows of its arguments: when known, the
// SHA-256 of the arguments as sent and their fingerprint, as bytes.
type recentArgs struct {
	known   bool
	sum, fp [sha256.Size]byte
}

// recentOpsSize bounds the set: under a megabyte per handler.
const recentOpsSize = 4096

func newRecentOps(size int) *recentOps {
	return &recentOps{set: make(map[string]recentArgs), size: size}
}

func (r *recentOps) has(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[k.ID]
	return ok
}

// add adds k, keeping what its entry knows of its arguments if it has one.
func (r *recentOps) add(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[k.ID]; !ok {
		r.put(k.ID, recentArgs{})
	}
}

// remember adds k with args, its arguments as sent, and fp, their
// fingerprint; fp "" adds k alone.
func (r *recentOps) remember(k Key, args json.RawMessage, fp string) {
	var a recentArgs
	if len(fp) == 2*sha256.Size {
		if _, err := hex.Decode(a.fp[:], []byte(fp)); err == nil {
			a.known, a.sum = true, argsfp.Sum256(args)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !a.known {
		if _, ok := r.set[k.ID]; ok {
			return
		}
	}
	r.put(k.ID, a)
}

// fingerprint returns the fingerprint of args, the arguments of a call
// with op key k, when k's entry holds the fingerprint of the same bytes;
// "" otherwise.
func (r *recentOps) fingerprint(k Key, args json.RawMessage) string {
	r.mu.Lock()
	a := r.set[k.ID]
	r.mu.Unlock()
	if !a.known || argsfp.Sum256(args) != a.sum {
		return ""
	}
	return oprecord.Hex(a.fp)
}

// put sets id's entry to a, adding id if it is not there. r.mu is held.
func (r *recentOps) put(id string, a recentArgs) {
	if _, ok := r.set[id]; ok {
		r.set[id] = a
		return
	}
	r.set[id] = a
	if len(r.ring) < r.size {
		r.ring = append(r.ring, id)
		return
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % r.size
}
