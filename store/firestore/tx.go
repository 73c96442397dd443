package firestore

import (
	"context"
	"errors"
	"fmt"

	fs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

var (
	errConflictCommit = fmt.Errorf("%w: the transaction aborted or a precondition failed at commit", backend.ErrConflict)
	errStaleRead      = fmt.Errorf("%w: a document read changed before commit", backend.ErrConflict)
	errCreateLost     = fmt.Errorf("%w: a Create sent with the commit found a document", backend.ErrConflict)
)

// Run implements idem.Store. Each attempt is one client.RunTransaction of
// one try (fs.MaxAttempts(1)): Run retries itself, with kit.Retry, so
// that fn's ErrConflict, an aborted transaction (a lock lost to an older
// one), a read that changed before the commit and a failed precondition at
// commit all run fn again, up to Options.MaxAttempts times.
//
// The Tx reads optimistically: fn's reads take no lock (a slow handler
// holds up no one). Writes go out with the commit, with preconditions from
// fn's reads, which the commit checks. When fn returns, the documents it
// read and does not write are read again in the transaction, which locks
// them until the commit, and the attempt commits only if none changed.
func (s *Store) Run(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	deferCreates := true
	return s.retry.Do(ctx, func() error {
		err := s.attempt(ctx, fn, deferCreates)
		if errors.Is(err, errCreateLost) {
			// A Create sent with the commit found a document there, maybe
			// an expired one fn never read: check Creates when called
			// from now on.
			deferCreates = false
		}
		return err
	}, kit.OnConflict)
}

// attempt runs fn once in a transaction and commits it.
func (s *Store) attempt(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error, deferCreates bool) error {
	var (
		t        *tx
		fnErr    error
		panicked any
		sent     bool // fn returned nil and the writes went to RunTransaction's commit
	)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, ftx *fs.Transaction) error {
		t = &tx{s: s, ftx: ftx}
		t.Init("firestore", t, s.opts, kit.Mode{Snapshot: true, DeferCreates: deferCreates})
		defer func() {
			if p := recover(); p != nil {
				panicked = p
				fnErr = errors.New("firestore: fn panicked")
			}
		}()
		fnErr = fn(ctx, t)
		t.Close()
		if fnErr != nil {
			if !errors.Is(fnErr, backend.ErrConflict) {
				// fn may have decided on reads that no single state held
				// (one before another transaction committed, one after):
				// then its error may be an artefact of that, and fn runs
				// again.
				if errors.Is(t.err, backend.ErrConflict) {
					fnErr = t.err // a read As checked again had changed
				} else if !t.locked {
					if err := t.verify(outside(ctx, s.client), t.readKeys(false)); errors.Is(err, backend.ErrConflict) {
						fnErr = err
					}
				}
			}
			return fnErr
		}
		if fnErr = t.flush(outside(ctx, s.client)); fnErr != nil {
			return fnErr
		}
		sent = true
		return nil
	}, fs.MaxAttempts(1))
	if t != nil {
		t.Close()
	}
	if panicked != nil {
		panic(panicked)
	}
	if err == nil {
		return nil
	}
	if !sent {
		if fnErr != nil {
			return fnErr
		}
		return mapErr(err) // BeginTransaction failed
	}
	return commitErr(err)
}

// commitErr classifies an error of RunTransaction once fn's writes went to
// its commit. Only Aborted, FailedPrecondition and AlreadyExists prove that
// nothing was applied. Any other answer from the server, and a context
// ended, may follow a commit that was applied: the client library sends a
// commit again when the first one's answer is lost (Unavailable), and a
// commit sent again after one that was applied fails with InvalidArgument
// ("Transaction is invalid or closed"). An error without a gRPC status came
// from the library's own checks before it sent anything (a read after a
// write through the transaction As hands out).
func commitErr(err error) error {
	st, fromServer := status.FromError(err)
	switch {
	case fromServer && st.Code() == codes.AlreadyExists:
		return fmt.Errorf("%w (%w)", errCreateLost, err)
	case fromServer && (st.Code() == codes.Aborted || st.Code() == codes.FailedPrecondition):
		return fmt.Errorf("%w (%w)", errConflictCommit, err)
	case fromServer, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", backend.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("firestore: before commit: %w", err)
}

// outside reads outside any transaction.
func outside(ctx context.Context, c *fs.Client) getAll {
	return func(refs []*fs.DocumentRef) ([]*fs.DocumentSnapshot, error) { return c.GetAll(ctx, refs) }
}

// mapErr maps an error of a read to the store's errors: an aborted
// transaction is a conflict, so fn (which returns it) runs again.
func mapErr(err error) error {
	if status.Code(err) == codes.Aborted {
		return fmt.Errorf("%w: %w", backend.ErrConflict, err)
	}
	return err
}

// tx is one attempt's transaction: a kit.Buffer over the database, whose
// writes go to the Firestore transaction at the commit (flush).
type tx struct {
	kit.Buffer
	s   *Store
	ftx *fs.Transaction
	seq int64 // provisional versions handed out
	// locked is set once As has handed out the transaction: from then on
	// reads go through it (and lock), since the caller may write through
	// it and Firestore takes no reads after writes.
	locked bool
	err    error // a failed check of earlier reads at As; fails the attempt
}

// ReadDoc implements [kit.Source]: outside the transaction (no lock held
// while fn runs; flush checks the read again in the transaction), or, once
// As has handed out the transaction, in it.
func (t *tx) ReadDoc(ctx context.Context, k backend.Key) (kit.Doc, error) {
	if t.err != nil {
		return kit.Doc{}, t.err
	}
	var snap *fs.DocumentSnapshot
	var err error
	if t.locked {
		snap, err = t.ftx.Get(t.s.Doc(k))
	} else {
		snap, err = t.s.Doc(k).Get(ctx)
	}
	if err != nil && status.Code(err) != codes.NotFound {
		return kit.Doc{}, fmt.Errorf("firestore: reading %s: %w", k, mapErr(err))
	}
	return decode(k, snap)
}

// NextVersion implements [kit.Source]: a provisional version, negative and
// unique in the tx; the commit's update time is the real one.
func (t *tx) NextVersion(backend.Key, backend.Version) backend.Version {
	t.seq++
	return backend.Version(-t.seq)
}

// getAll is a GetAll of the documents of keys, outside the transaction or in
// it, decoded.
type getAll func([]*fs.DocumentRef) ([]*fs.DocumentSnapshot, error)

func (t *tx) readAll(get getAll, keys []backend.Key) ([]kit.Doc, error) {
	refs := make([]*fs.DocumentRef, len(keys))
	for i, k := range keys {
		refs[i] = t.s.Doc(k)
	}
	snaps, err := get(refs)
	if err != nil {
		return nil, fmt.Errorf("firestore: reading at commit: %w", mapErr(err))
	}
	ds := make([]kit.Doc, len(keys))
	for i, k := range keys {
		if ds[i], err = decode(k, snaps[i]); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// verify reads again the documents of keys, which this tx read outside the
// transaction, and returns an error wrapping ErrConflict if one changed.
func (t *tx) verify(get getAll, keys []backend.Key) error {
	if len(keys) == 0 {
		return nil
	}
	ds, err := t.readAll(get, keys)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if ds[i].Version != t.ReadOf(k).Version {
			return errStaleRead
		}
	}
	return nil
}

// readKeys returns the keys this tx read; with unwritten, only those whose
// read no write of this tx checks at commit.
func (t *tx) readKeys(unwritten bool) []backend.Key {
	reads := t.Reads()
	keys := make([]backend.Key, 0, len(reads))
	for _, r := range reads {
		if w := t.WriteOf(r.Key); unwritten && w != nil && (w.Data != nil || r.Version != 0) {
			continue // sent with a precondition from this read
		}
		keys = append(keys, r.Key)
	}
	return keys
}

// As sets a **fs.Transaction target to the Firestore transaction, for the
// caller's own documents, and reports whether it did. From then on the Tx
// reads in that transaction too; the documents it read before are read
// again in it, and if one changed the attempt fails with ErrConflict and fn
// runs again. Firestore takes reads only before writes: after a write
// through the native transaction, read nothing more, through it or the Tx
// (the Tx's own writes go out with the commit, and are fine).
func (t *tx) As(target any) bool {
	p, ok := target.(**fs.Transaction)
	if !ok {
		return false
	}
	*p = t.ftx
	if !t.locked {
		t.locked = true
		if err := t.verify(t.ftx.GetAll, t.readKeys(false)); err != nil && t.err == nil {
			t.err = err
		}
	}
	return true
}

// fields returns the stored fields of w, for a Set or a Create.
func fields(w *kit.Write) map[string]any {
	m := map[string]any{FieldDocument: string(w.Data), FieldWrittenAt: fs.ServerTimestamp}
	if !w.ExpiresAt.IsZero() {
		m[FieldExpiresAt] = w.ExpiresAt
	}
	return m
}

// flush checks the limits, then hands every buffered write to the
// Firestore transaction, with a precondition from what this tx read. get
// reads outside the transaction.
func (t *tx) flush(get getAll) error {
	if t.err != nil {
		return t.err
	}
	writes := t.Writes()
	n := 0
	for _, w := range writes {
		if r := t.ReadOf(w.Key); w.Data == nil && r != nil && r.Version == 0 {
			continue // absent before and after: nothing to send
		}
		n++
	}
	if n > t.s.maxWrites {
		return fmt.Errorf("%w: %d writes in one transaction, limit %d", backend.ErrTooLarge, n, t.s.maxWrites)
	}
	// The keys of Creates sent with the commit, not read yet, are read now,
	// outside the transaction: an expired document there is replaced (an
	// update with the update time read as precondition), a live one fails
	// the attempt, and on an absent one the Create fails if a document
	// has come since.
	var deferred []backend.Key
	for _, w := range writes {
		if w.AtCommit {
			deferred = append(deferred, w.Key)
		}
	}
	if len(deferred) > 0 {
		ds, err := t.readAll(get, deferred)
		if err != nil {
			return err
		}
		for i, k := range deferred {
			if ds[i].Live(t.s.opts.Now()) {
				return fmt.Errorf("%w: %s created at commit over a live document", backend.ErrConflict, k)
			}
			t.SetRead(k, ds[i])
			t.WriteOf(k).AtCommit = false
		}
	}
	if !t.locked {
		// The commit's check of what fn read and does not write: read it
		// again in the transaction, which locks it until the commit. A
		// key fn writes is not read again: its write carries a
		// precondition from fn's read (absent, or the update time read),
		// which the commit checks. Reading it again would lock it too:
		// the emulator holds a read lock until the commit, so
		// transactions that read and write one document each wait at
		// commit for the others' read locks, until all but one end in
		// "Transaction lock timeout" about 2 s later.
		if err := t.verify(t.ftx.GetAll, t.readKeys(true)); err != nil {
			return err
		}
	}
	for i := range writes {
		w := &writes[i]
		ref := t.s.Doc(w.Key)
		r := t.ReadOf(w.Key)
		read := r != nil
		exists := read && r.Version != 0
		var err error
		switch {
		case w.Data == nil && !read:
			err = t.ftx.Delete(ref)
		case w.Data == nil && exists:
			err = t.ftx.Delete(ref, fs.LastUpdateTime(updateTime(r.Version)))
		case w.Data == nil:
			// Absent before and after: nothing to write.
		case exists:
			var exp any = fs.Delete
			if !w.ExpiresAt.IsZero() {
				exp = w.ExpiresAt
			}
			err = t.ftx.Update(ref, []fs.Update{
				{Path: FieldDocument, Value: string(w.Data)},
				{Path: FieldExpiresAt, Value: exp},
				{Path: FieldWrittenAt, Value: fs.ServerTimestamp},
			}, fs.LastUpdateTime(updateTime(r.Version)))
		case read || w.AtCommit:
			err = t.ftx.Create(ref, fields(w))
		default:
			err = t.ftx.Set(ref, fields(w))
		}
		if err != nil {
			return fmt.Errorf("firestore: writing %s: %w", w.Key, err)
		}
	}
	return nil
}
