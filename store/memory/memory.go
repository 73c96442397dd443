// Package memory is the in-process reference implementation of [idem.Store]:
// the semantics every other backend is tested against, and a store for tests
// and examples. Nothing survives the process.
//
//	s := memory.New(nil)
//	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
//		return tx.Create(ctx, idem.Key{Collection: "posts", ID: "p1"}, post)
//	})
//
// Transactions are optimistic: reads record the version they saw, writes are
// buffered, and the commit checks under one mutex that nothing read has
// changed since; if something has, Run calls fn again. A blind write (Put)
// whose key another transaction wrote meanwhile still commits, with a fresh
// version, unless fn read its version back: then fn runs again, as it would
// on a SERIALIZABLE database.
package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/sdk/idem/backend"
)

// Options configure a Store. The zero value (or nil) means the defaults.
type Options struct {
	// Now is the store's clock, used to decide whether a document has
	// expired. Default time.Now.
	Now func() time.Time
	// MaxDocumentBytes is the largest JSON document a write accepts; larger
	// ones fail with idem.ErrTooLarge. Default 1 MiB.
	MaxDocumentBytes int
	// MaxAttempts bounds how many times Run calls fn when it keeps losing
	// to concurrent transactions. Default 64.
	MaxAttempts int
}

// Store is an in-memory idem.Store. The zero value is not usable; call New.
type Store struct {
	now      func() time.Time
	maxBytes int
	attempts int
	seq      atomic.Int64 // last version handed out; versions are never reused

	mu   sync.Mutex // guards docs
	docs map[backend.Key]doc

	// sweepMu guards swept: the keys the last scan of a sweep found
	// expired and no sweep has deleted yet.
	sweepMu sync.Mutex
	swept   []backend.Key
}

type doc struct {
	data    []byte
	version backend.Version
	expires time.Time
}

// New returns an empty Store; nil opts means the defaults. Every store's
// constructor has this shape: its handle (none here) and *Options.
func New(opts *Options) *Store {
	s := &Store{now: time.Now, maxBytes: 1 << 20, attempts: 64, docs: make(map[backend.Key]doc)}
	if opts != nil {
		if opts.Now != nil {
			s.now = opts.Now
		}
		if opts.MaxDocumentBytes > 0 {
			s.maxBytes = opts.MaxDocumentBytes
		}
		if opts.MaxAttempts > 0 {
			s.attempts = opts.MaxAttempts
		}
	}
	return s
}

var errConflictCommit = fmt.Errorf("%w: a document read or written changed before commit", backend.ErrConflict)

// Run implements idem.Store.
func (s *Store) Run(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	var err error
	for attempt := 0; attempt < s.attempts; attempt++ {
		if attempt > 0 {
			if err := backend.Backoff(ctx, attempt, 50*time.Microsecond, 20*time.Millisecond); err != nil {
				return err
			}
		}
		t := &tx{s: s}
		t.reads.items, t.writes.items = t.readBuf[:0], t.writeBuf[:0]
		err = fn(ctx, t)
		t.closed = true
		if err == nil {
			err = t.commit()
			if err == nil {
				return nil
			}
		} else if !errors.Is(err, backend.ErrConflict) && t.stale() {
			// fn decided on reads that no single state held (one read
			// before another transaction committed, one after): its
			// error may be an artefact of that, so it runs again.
			err = errConflictCommit
		}
		if !errors.Is(err, backend.ErrConflict) {
			return err
		}
	}
	return err
}

// A write is one key's pending write: a document, or a delete.
type write struct {
	k        backend.Key
	data     []byte // nil: delete
	version  backend.Version
	expires  time.Time
	observed bool // fn read this write's version back (Get, Update)
}

// A read is the stored version a tx saw at a key (0 for no entry), expired
// or not; the commit requires it unchanged.
type read struct {
	k backend.Key
	v backend.Version
}

// indexFrom is how many reads or writes a tx looks through one by one
// before it indexes them in a map.
const indexFrom = 8

// keyedList holds one item per key, in the order of each key's first item:
// found by looking through them one by one while there are few, through a
// map of positions past indexFrom.
type keyedList[T interface{ key() backend.Key }] struct {
	items []T
	at    map[backend.Key]int
}

// find returns the item at k, or nil.
func (l *keyedList[T]) find(k backend.Key) *T {
	if l.at != nil {
		if i, ok := l.at[k]; ok {
			return &l.items[i]
		}
		return nil
	}
	for i := range l.items {
		if l.items[i].key() == k {
			return &l.items[i]
		}
	}
	return nil
}

// add appends x, whose key has no item yet.
func (l *keyedList[T]) add(x T) {
	l.items = append(l.items, x)
	switch n := len(l.items); {
	case l.at != nil:
		l.at[x.key()] = n - 1
	case n > indexFrom:
		l.at = make(map[backend.Key]int, 2*n)
		for i := range l.items {
			l.at[l.items[i].key()] = i
		}
	}
}

func (w write) key() backend.Key { return w.k }
func (r read) key() backend.Key  { return r.k }

// tx is one attempt's transaction. Most transactions touch a few keys: their
// reads and writes live in the tx itself, so that an attempt allocates the
// tx and the documents it encodes, and nothing else.
type tx struct {
	s        *Store
	closed   bool
	reads    keyedList[read]      // every key this tx looked at, once each
	writes   keyedList[write]     // one per key, in the order of each key's first write
	opts     backend.WriteOptions // the options of the write being made
	readBuf  [4]read
	writeBuf [2]write
}

// setWrite records w as the pending write at its key, in place of an
// earlier one.
func (t *tx) setWrite(w write) {
	if p := t.writes.find(w.k); p != nil {
		*p = w
		return
	}
	t.writes.add(w)
}

// noteRead records the version seen at k, unless k was seen before.
func (t *tx) noteRead(k backend.Key, v backend.Version) {
	if t.reads.find(k) == nil {
		t.reads.add(read{k: k, v: v})
	}
}

var errClosed = errors.New("memory: transaction used after Run returned")

// view returns the state this tx sees at k: its own write if any, else the
// committed document, recording the read.
func (t *tx) view(k backend.Key) (data []byte, v backend.Version, live bool) {
	if w := t.writes.find(k); w != nil {
		if w.data == nil {
			return nil, 0, false
		}
		w.observed = true
		return w.data, w.version, backend.Live(w.expires, t.s.now())
	}
	t.s.mu.Lock()
	d, ok := t.s.docs[k]
	t.s.mu.Unlock()
	t.noteRead(k, d.version) // 0 for no entry
	if !ok {
		return nil, 0, false
	}
	return d.data, d.version, backend.Live(d.expires, t.s.now())
}

func (t *tx) check(k backend.Key) error {
	if t.closed {
		return errClosed
	}
	return k.Validate()
}

func (t *tx) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := t.check(k); err != nil {
		return 0, err
	}
	data, v, live := t.view(k)
	if !live {
		return 0, backend.ErrNotFound
	}
	if dst != nil {
		if err := json.Unmarshal(data, dst); err != nil {
			return 0, fmt.Errorf("memory: decoding %s: %w", k, err)
		}
	}
	return v, nil
}

func (t *tx) encode(doc any) ([]byte, error) { return backend.EncodeDocument(doc, t.s.maxBytes) }

func (t *tx) put(k backend.Key, data []byte, opts []backend.WriteOption) {
	// backend.ApplyWriteOptions, into the tx: its result would be allocated.
	t.opts = backend.WriteOptions{}
	for _, f := range opts {
		if f != nil {
			f(&t.opts)
		}
	}
	t.setWrite(write{k: k, data: data, version: backend.Version(t.s.seq.Add(1)), expires: t.opts.ExpiresAt})
}

func (t *tx) Create(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := t.encode(doc)
	if err != nil {
		return err
	}
	if _, _, live := t.view(k); live {
		return backend.ErrExists
	}
	t.put(k, b, opts)
	return nil
}

func (t *tx) Put(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := t.encode(doc)
	if err != nil {
		return err
	}
	t.put(k, b, opts)
	return nil
}

func (t *tx) Update(ctx context.Context, k backend.Key, v backend.Version, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := t.encode(doc)
	if err != nil {
		return err
	}
	_, cur, live := t.view(k)
	if !live {
		return backend.ErrNotFound
	}
	if cur != v {
		return backend.ErrConflict
	}
	t.put(k, b, opts)
	return nil
}

func (t *tx) Delete(ctx context.Context, k backend.Key, v backend.Version) error {
	if err := t.check(k); err != nil {
		return err
	}
	_, cur, live := t.view(k)
	if !live {
		return backend.ErrNotFound
	}
	if v != 0 && cur != v {
		return backend.ErrConflict
	}
	t.setWrite(write{k: k})
	return nil
}

func (t *tx) As(target any) bool { return false }

// stale reports whether a document this tx read has changed since.
func (t *tx) stale() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.staleLocked()
}

func (t *tx) staleLocked() bool {
	for _, r := range t.reads.items {
		if t.s.docs[r.k].version != r.v { // 0 for no entry
			return true
		}
	}
	return false
}

func (t *tx) commit() error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.staleLocked() {
		return errConflictCommit
	}
	// Check every write before applying any.
	for i := range t.writes.items {
		w := &t.writes.items[i]
		if w.data == nil {
			continue
		}
		if d, ok := s.docs[w.k]; ok && d.version >= w.version {
			// A blind Put whose version was handed out before another
			// transaction's write to k committed. Versions only go up: a
			// write whose version fn never saw gets a fresh one; one fn
			// saw (and may have used) makes the attempt run again.
			if w.observed {
				return errConflictCommit
			}
			w.version = backend.Version(s.seq.Add(1))
		}
	}
	for _, w := range t.writes.items {
		if w.data == nil {
			delete(s.docs, w.k)
			continue
		}
		s.docs[w.k] = doc{data: w.data, version: w.version, expires: w.expires}
	}
	return nil
}

// Read implements [backend.Reader]: the latest committed state of k, outside
// any transaction.
func (s *Store) Read(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	d, ok := s.docs[k]
	s.mu.Unlock()
	if !ok || !backend.Live(d.expires, s.now()) {
		return 0, backend.ErrNotFound
	}
	if dst != nil {
		if err := json.Unmarshal(d.data, dst); err != nil {
			return 0, fmt.Errorf("memory: decoding %s: %w", k, err)
		}
	}
	return d.version, nil
}

// sweepHold is how many documents Sweep deletes, and sweepScan how many it
// looks at when it scans, while it holds the store's lock; it lets
// transactions in between.
const (
	sweepHold = 8
	sweepScan = 1024
)

// Sweep deletes up to limit expired documents and returns how many it
// deleted; fewer than limit means no expired document was left. limit must
// be positive.
//
// A sweep scans every document once and keeps the keys of the expired ones,
// which this call and the next ones delete (each checked again: a document
// written since with a later expiry stays); it scans again only when those
// are done. So a backlog costs one scan and one deletion a document,
// whatever the store holds, and a write pays nothing for it. It holds the
// store's lock for at most 1,024 documents scanned or 8 deleted at a time.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, errors.New("memory: Sweep limit must be positive")
	}
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	now := s.now()
	n, scanned := 0, false
	for n < limit {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if len(s.swept) == 0 {
			if scanned {
				break // this call's own scan found no more
			}
			s.scanExpired(now)
			scanned = true
			continue
		}
		s.mu.Lock()
		for i := 0; i < sweepHold && n < limit && len(s.swept) > 0; i++ {
			k := s.swept[len(s.swept)-1]
			s.swept[len(s.swept)-1] = backend.Key{}
			s.swept = s.swept[:len(s.swept)-1]
			if d, ok := s.docs[k]; ok && !backend.Live(d.expires, now) {
				delete(s.docs, k)
				n++
			}
		}
		s.mu.Unlock()
		if len(s.swept) == 0 {
			s.swept = nil // a backlog's keys: not kept for the next one
		}
		runtime.Gosched() // let the transactions waiting for the lock have it
	}
	return n, nil
}

// scanExpired sets s.swept to the keys of the documents expired by now,
// looking at sweepScan documents per hold of the lock.
func (s *Store) scanExpired(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	visited := 0
	for k, d := range s.docs {
		if !backend.Live(d.expires, now) {
			s.swept = append(s.swept, k)
		}
		if visited++; visited%sweepScan == 0 {
			// Adding and deleting entries while ranging over a map is
			// allowed, and the range goes on under the lock; an entry
			// added meanwhile may or may not be seen, as in any scan.
			s.mu.Unlock()
			runtime.Gosched()
			s.mu.Lock()
		}
	}
}
