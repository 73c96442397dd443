package firestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	fs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/sdk/idem/backend"
)

var (
	errClosed         = errors.New("firestore: transaction used after Run returned")
	errConflictCommit = fmt.Errorf("%w: the transaction aborted or a precondition failed at commit", backend.ErrConflict)
	errStaleRead      = fmt.Errorf("%w: a document read changed before commit", backend.ErrConflict)
	errCreateLost     = fmt.Errorf("%w: a Create sent with the commit found a document", backend.ErrConflict)
)

// Run implements idem.Store. Each attempt is one client.RunTransaction of
// one try (fs.MaxAttempts(1)): Run retries itself, with backend.Backoff, so
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
	var err error
	deferCreates := true
	for attempt := 0; attempt < s.attempts; attempt++ {
		if attempt > 0 {
			if err := backend.Backoff(ctx, attempt, 2*time.Millisecond, 200*time.Millisecond); err != nil {
				return err
			}
		}
		err = s.attempt(ctx, fn, deferCreates)
		if errors.Is(err, errCreateLost) {
			// A Create sent with the commit found a document there, maybe
			// an expired one fn never read: check Creates when called
			// from now on.
			deferCreates = false
		}
		if err == nil || !errors.Is(err, backend.ErrConflict) {
			return err
		}
	}
	return err
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
		t = &tx{s: s, ftx: ftx, deferCreates: deferCreates, reads: map[backend.Key]stored{}, writes: map[backend.Key]*write{}}
		defer func() {
			if p := recover(); p != nil {
				panicked = p
				fnErr = errors.New("firestore: fn panicked")
			}
		}()
		fnErr = fn(ctx, t)
		t.closed = true
		if fnErr != nil {
			if !errors.Is(fnErr, backend.ErrConflict) && !t.locked && t.err == nil {
				// fn may have decided on reads that no single state held
				// (one before another transaction committed, one after):
				// then its error may be an artefact of that, and fn runs
				// again.
				if err := t.verify(outside(ctx, s.client), t.readKeys(false)); errors.Is(err, backend.ErrConflict) {
					fnErr = err
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
		t.closed = true
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

// A write is the state this tx leaves at a key: data nil for absent.
type write struct {
	data     []byte
	expires  time.Time
	version  backend.Version // provisional: negative, unique in the tx
	atCommit bool            // only a CreateAtCommit wrote this key, unread
}

type tx struct {
	s      *Store
	ftx    *fs.Transaction
	closed bool
	// reads holds what this tx read at every key it looked at (before its
	// own writes); the writes' preconditions come from it.
	reads  map[backend.Key]stored
	writes map[backend.Key]*write
	order  []backend.Key
	seq    int64 // provisional versions handed out
	// locked is set once As has handed out the transaction: from then on
	// reads go through it (and lock), since the caller may write through
	// it and Firestore takes no reads after writes.
	locked bool
	err    error // a failed check of earlier reads at As; fails the attempt
	// deferCreates lets a CreateAtCommit of an unread key go out as a
	// Create with the commit, unchecked until then.
	deferCreates bool
}

func (t *tx) check(k backend.Key) error {
	if t.closed {
		return errClosed
	}
	return k.Validate()
}

// read returns the committed document at k, reading it the first time:
// outside the transaction (no lock held while fn runs; flush checks the
// read again in the transaction), or, once As has handed out the
// transaction, in it.
func (t *tx) read(ctx context.Context, k backend.Key) (stored, error) {
	if t.err != nil {
		return stored{}, t.err
	}
	if d, ok := t.reads[k]; ok {
		return d, nil
	}
	var snap *fs.DocumentSnapshot
	var err error
	if t.locked {
		snap, err = t.ftx.Get(t.s.Doc(k))
	} else {
		snap, err = t.s.Doc(k).Get(ctx)
	}
	if err != nil && status.Code(err) != codes.NotFound {
		return stored{}, fmt.Errorf("firestore: reading %s: %w", k, mapErr(err))
	}
	d, err := decode(k, snap)
	if err != nil {
		return stored{}, err
	}
	t.reads[k] = d
	return d, nil
}

// getAll is a GetAll of the documents of keys, outside the transaction or in
// it, decoded.
type getAll func([]*fs.DocumentRef) ([]*fs.DocumentSnapshot, error)

func (t *tx) readAll(get getAll, keys []backend.Key) ([]stored, error) {
	refs := make([]*fs.DocumentRef, len(keys))
	for i, k := range keys {
		refs[i] = t.s.Doc(k)
	}
	snaps, err := get(refs)
	if err != nil {
		return nil, fmt.Errorf("firestore: reading at commit: %w", mapErr(err))
	}
	ds := make([]stored, len(keys))
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
		if was := t.reads[k]; ds[i].exists != was.exists || !ds[i].updated.Equal(was.updated) {
			return errStaleRead
		}
	}
	return nil
}

// readKeys returns the keys this tx read; with unwritten, only those whose
// read no write of this tx checks at commit.
func (t *tx) readKeys(unwritten bool) []backend.Key {
	keys := make([]backend.Key, 0, len(t.reads))
	for k, d := range t.reads {
		if w, ok := t.writes[k]; unwritten && ok && (w.data != nil || d.exists) {
			continue // sent with a precondition from this read
		}
		keys = append(keys, k)
	}
	return keys
}

// view returns the state this tx sees at k: its own write if any, else the
// committed document. live reports whether there is a live document.
func (t *tx) view(ctx context.Context, k backend.Key) (data []byte, v backend.Version, live bool, err error) {
	if w, ok := t.writes[k]; ok && !w.atCommit {
		if w.data == nil {
			return nil, 0, false, nil
		}
		return w.data, w.version, backend.Live(w.expires, t.s.now()), nil
	}
	d, err := t.read(ctx, k)
	if err != nil {
		return nil, 0, false, err
	}
	if w, ok := t.writes[k]; ok && w.atCommit {
		// Read after its CreateAtCommit: the Create takes effect only
		// over an absent document, as a Create checked now would.
		if t.s.live(d) {
			return nil, 0, false, fmt.Errorf("%w: %s created at commit over a live document", backend.ErrConflict, k)
		}
		w.atCommit = false
		return w.data, w.version, backend.Live(w.expires, t.s.now()), nil
	}
	return d.data, d.version(), t.s.live(d), nil
}

func (t *tx) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := t.check(k); err != nil {
		return 0, err
	}
	data, v, live, err := t.view(ctx, k)
	if err != nil {
		return 0, err
	}
	if !live {
		return 0, backend.ErrNotFound
	}
	if err := unmarshal(k, data, dst); err != nil {
		return 0, err
	}
	return v, nil
}

func (t *tx) put(k backend.Key, data []byte, o backend.WriteOptions, atCommit bool) {
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.seq++
	t.writes[k] = &write{data: data, expires: o.ExpiresAt, version: backend.Version(-t.seq), atCommit: atCommit}
}

func (t *tx) Create(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := backend.EncodeDocument(doc, t.s.maxBytes)
	if err != nil {
		return err
	}
	o := backend.ApplyWriteOptions(opts)
	if _, written := t.writes[k]; o.AtCommit && t.deferCreates && !written {
		if _, read := t.reads[k]; !read {
			// Not read: sent as a Create with the commit, which fails
			// the attempt if a document (live or expired) is there. The
			// next attempt's fn reads the key (the op record) and sees.
			t.put(k, b, o, true)
			return nil
		}
	}
	_, _, live, err := t.view(ctx, k)
	if err != nil {
		return err
	}
	if live {
		return backend.ErrExists
	}
	t.put(k, b, o, false)
	return nil
}

func (t *tx) Put(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := backend.EncodeDocument(doc, t.s.maxBytes)
	if err != nil {
		return err
	}
	t.put(k, b, backend.ApplyWriteOptions(opts), false)
	return nil
}

func (t *tx) Update(ctx context.Context, k backend.Key, v backend.Version, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := backend.EncodeDocument(doc, t.s.maxBytes)
	if err != nil {
		return err
	}
	_, cur, live, err := t.view(ctx, k)
	if err != nil {
		return err
	}
	if !live {
		return backend.ErrNotFound
	}
	if cur != v {
		return backend.ErrConflict
	}
	t.put(k, b, backend.ApplyWriteOptions(opts), false)
	return nil
}

func (t *tx) Delete(ctx context.Context, k backend.Key, v backend.Version) error {
	if err := t.check(k); err != nil {
		return err
	}
	_, cur, live, err := t.view(ctx, k)
	if err != nil {
		return err
	}
	if !live {
		return backend.ErrNotFound
	}
	if v != 0 && cur != v {
		return backend.ErrConflict
	}
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.writes[k] = &write{}
	return nil
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
func fields(w *write) map[string]any {
	m := map[string]any{FieldDocument: string(w.data), FieldWrittenAt: fs.ServerTimestamp}
	if !w.expires.IsZero() {
		m[FieldExpiresAt] = w.expires
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
	n := 0
	for _, k := range t.order {
		if d, read := t.reads[k]; t.writes[k].data == nil && read && !d.exists {
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
	for _, k := range t.order {
		if t.writes[k].atCommit {
			deferred = append(deferred, k)
		}
	}
	if len(deferred) > 0 {
		ds, err := t.readAll(get, deferred)
		if err != nil {
			return err
		}
		for i, k := range deferred {
			if t.s.live(ds[i]) {
				return fmt.Errorf("%w: %s created at commit over a live document", backend.ErrConflict, k)
			}
			t.reads[k] = ds[i]
			t.writes[k].atCommit = false
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
	for _, k := range t.order {
		w := t.writes[k]
		ref := t.s.Doc(k)
		d, read := t.reads[k]
		var err error
		switch {
		case w.data == nil && !read:
			err = t.ftx.Delete(ref)
		case w.data == nil && d.exists:
			err = t.ftx.Delete(ref, fs.LastUpdateTime(d.updated))
		case w.data == nil:
			// Absent before and after: nothing to write.
		case read && d.exists:
			var exp any = fs.Delete
			if !w.expires.IsZero() {
				exp = w.expires
			}
			err = t.ftx.Update(ref, []fs.Update{
				{Path: FieldDocument, Value: string(w.data)},
				{Path: FieldExpiresAt, Value: exp},
				{Path: FieldWrittenAt, Value: fs.ServerTimestamp},
			}, fs.LastUpdateTime(d.updated))
		case read || w.atCommit:
			err = t.ftx.Create(ref, fields(w))
		default:
			err = t.ftx.Set(ref, fields(w))
		}
		if err != nil {
			return fmt.Errorf("firestore: writing %s: %w", k, err)
		}
	}
	return nil
}
