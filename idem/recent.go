package idem

import "sync"

// recentOps remembers the op keys a wrapped handler answered lately (a
// commit, a replay, an unknown outcome), up to a fixed number, forgetting the
// oldest first. A call whose op key is here reads the op record before its
// transaction, since a repeat is likely; any other call skips that read and
// lets the op record's create at commit catch a duplicate (see
// call.runOp).
type recentOps struct {
	mu   sync.Mutex // guards the fields below
	set  map[string]struct{}
	ring []string // insertion order; len(ring) <= size
	next int      // index in ring of the oldest entry once ring is full
	size int
}

// recentOpsSize bounds the set: a few hundred kilobytes at most per handler.
const recentOpsSize = 4096

func newRecentOps(size int) *recentOps {
	return &recentOps{set: make(map[string]struct{}), size: size}
}

func (r *recentOps) has(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[k.ID]
	return ok
}

func (r *recentOps) add(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[k.ID]; ok {
		return
	}
	r.set[k.ID] = struct{}{}
	if len(r.ring) < r.size {
		r.ring = append(r.ring, k.ID)
		return
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = k.ID
	r.next = (r.next + 1) % r.size
}
