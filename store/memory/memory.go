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
//
// RunReadOnly is the same transaction with its writes refused: nothing
// waits, and fn runs again if a document it read changed before it
// returned, so that its last run read one committed state.
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
	"github.com/idemkit/sdk/idem/backend/kit"
)

// Options configure a Store. The zero value (or nil) means the defaults;
// a negative number is refused: New panics, naming the field.
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
	// NoSweep turns off the background sweep of expired documents, which
	// New otherwise starts (see Store.Close and docs/stores.md).
	NoSweep bool
	// SweepEvery is the longest the background sweep waits between two
	// rounds, when it finds little or nothing to delete. Default 1 minute.
	SweepEvery time.Duration
	// OnSweep, if set, is called after every round of the background
	// sweep with what it deleted and its error. Nil logs the rounds that
	// failed with slog.Default.
	OnSweep func(kit.SweepRound)
}

// Store is an in-memory idem.Store. The zero value is not usable; call New.
type Store struct {
	opts  kit.Options
	retry kit.Retry
	seq   atomic.Int64 // last version handed out; versions are never reused

	mu   sync.Mutex // guards docs
	docs map[backend.Key]doc

	// sweepMu guards swept: the keys the last scan of a sweep found
	// expired and no sweep has deleted yet.
	sweepMu sync.Mutex
	swept   []backend.Key

	sweeping *kit.Sweeping // the background sweep; nil when off
}

var (
	_ backend.Store          = (*Store)(nil)
	_ backend.Reader         = (*Store)(nil)
	_ backend.ReadOnlyRunner = (*Store)(nil)
	_ backend.Sweeper        = (*Store)(nil)
	_ backend.Tx             = (*tx)(nil)
	_ kit.Source             = (*tx)(nil)
)

type doc struct {
	data    []byte
	version backend.Version
	expires time.Time
}

// New returns an empty Store; nil opts means the defaults. Every store's
// constructor has this shape: its handle (none here) and *Options. New
// panics on a negative option, which is a mistake in the code that calls
// it (the other stores' constructors return that error).
//
// Unless Options.NoSweep is set, New starts a background sweep of expired
// documents, which Close stops (a Store dropped without Close stops it
// when the garbage collector frees the Store).
func New(opts *Options) *Store {
	if opts == nil {
		opts = &Options{}
	}
	o, err := kit.Options{Now: opts.Now, MaxDocumentBytes: opts.MaxDocumentBytes, MaxAttempts: opts.MaxAttempts}.
		Resolve("memory", kit.Options{Now: time.Now, MaxDocumentBytes: 1 << 20, MaxAttempts: 64})
	if err != nil {
		panic(err)
	}
	every, err := kit.Default("memory", "SweepEvery", opts.SweepEvery, kit.SweepEvery)
	if err != nil {
		panic(err)
	}
	s := &Store{
		opts:  o,
		retry: kit.Retry{Store: "memory", MaxAttempts: o.MaxAttempts, Base: 50 * time.Microsecond, Cap: 20 * time.Millisecond},
		docs:  make(map[backend.Key]doc),
	}
	s.sweeping = kit.StartSweeping(s, (*Store).Sweep,
		kit.SweepOptions{Store: "memory", Off: opts.NoSweep, Every: every, Report: opts.OnSweep})
	return s
}

// Close stops the background sweep and waits for a round in progress to
// end. It releases nothing else: the Store stays usable, and Sweep can
// still be called. It always returns nil.
func (s *Store) Close() error {
	s.sweeping.Stop()
	return nil
}

var errConflictCommit = fmt.Errorf("%w: a document read or written changed before commit", backend.ErrConflict)

// Run implements idem.Store.
func (s *Store) Run(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	return s.retry.Do(ctx, func() error { return s.attempt(ctx, fn) }, kit.OnConflict)
}

// RunReadOnly implements [backend.ReadOnlyRunner]: Run, with fn's writes
// refused (they fail with an error wrapping backend.ErrReadOnly). A
// transaction of this store holds nothing while fn runs, so it never waits
// for one that writes; when fn returns, the documents it read are checked
// unchanged, and fn runs again if one changed, up to Options.MaxAttempts
// times.
func (s *Store) RunReadOnly(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	return s.Run(ctx, kit.ReadOnly(fn))
}

func (s *Store) attempt(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	t := &tx{s: s}
	t.Init("memory", t, s.opts, kit.Mode{})
	err := fn(ctx, t)
	t.Close()
	if err == nil {
		return t.commit()
	}
	if !errors.Is(err, backend.ErrConflict) && t.stale() {
		// fn decided on reads that no single state held (one read before
		// another transaction committed, one after): its error may be an
		// artefact of that, so it runs again.
		return errConflictCommit
	}
	return err
}

// tx is one attempt's transaction: a kit.Buffer over the store's map. Most
// transactions touch a few keys: their reads and writes live in the tx
// itself, so that an attempt allocates the tx and the documents it encodes,
// and nothing else.
type tx struct {
	kit.Buffer
	s *Store
}

// ReadDoc implements [kit.Source].
func (t *tx) ReadDoc(ctx context.Context, k backend.Key) (kit.Doc, error) {
	t.s.mu.Lock()
	d := t.s.docs[k]
	t.s.mu.Unlock()
	return kit.Doc{Version: d.version, Data: d.data, ExpiresAt: d.expires}, nil
}

// NextVersion implements [kit.Source]: the store's next version.
func (t *tx) NextVersion(backend.Key, backend.Version) backend.Version {
	return backend.Version(t.s.seq.Add(1))
}

func (t *tx) As(target any) bool { return false }

// stale reports whether a document this tx read has changed since.
func (t *tx) stale() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.staleLocked()
}

func (t *tx) staleLocked() bool {
	for _, r := range t.Reads() {
		if t.s.docs[r.Key].version != r.Version { // 0 for no entry
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
	writes := t.Writes()
	for i := range writes {
		w := &writes[i]
		if w.Data == nil {
			continue
		}
		if d, ok := s.docs[w.Key]; ok && d.version >= w.Version {
			// A blind Put whose version was handed out before another
			// transaction's write to k committed. Versions only go up: a
			// write whose version fn never saw gets a fresh one; one fn
			// saw (and may have used) makes the attempt run again.
			if w.Observed {
				return errConflictCommit
			}
			w.Version = backend.Version(s.seq.Add(1))
		}
	}
	for _, w := range writes {
		if w.Data == nil {
			delete(s.docs, w.Key)
			continue
		}
		s.docs[w.Key] = doc{data: w.Data, version: w.Version, expires: w.ExpiresAt}
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
	if !ok || !backend.Live(d.expires, s.opts.Now()) {
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
	now := s.opts.Now()
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
