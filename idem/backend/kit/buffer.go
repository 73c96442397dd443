package kit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem/backend"
)

// A Doc is the committed state of a key as a backend read it.
type Doc struct {
	// Version is the stored version; 0 when nothing is stored at the key.
	// A backend that keeps tombstones gives a tombstone its version and a
	// nil Data.
	Version backend.Version
	// Data is the JSON document; nil for none.
	Data []byte
	// ExpiresAt is the document's expiry; zero for none.
	ExpiresAt time.Time
}

// Live reports whether d holds a document that is live at now.
func (d Doc) Live(now time.Time) bool { return d.Data != nil && backend.Live(d.ExpiresAt, now) }

// A Read is what a Buffer's transaction saw at a key the first time it
// looked, before any write of its own there: the commit requires it
// unchanged.
type Read struct {
	Key backend.Key
	Doc
}

// A Write is the state a Buffer's transaction leaves at a key.
type Write struct {
	Key       backend.Key
	Data      []byte // nil: delete
	Version   backend.Version
	ExpiresAt time.Time
	// AtCommit marks a Create with [backend.CreateAtCommit] of a key the
	// transaction has not read: the commit must fail (wrapping
	// ErrConflict) if a live document is there by then.
	AtCommit bool
	// Observed is set once fn has seen Version (a Get of the key after the
	// write).
	Observed bool
}

// A Source is the backend under a [Buffer].
type Source interface {
	// ReadDoc reads the committed state of k. A Buffer calls it once per
	// key and attempt.
	ReadDoc(ctx context.Context, k backend.Key) (Doc, error)
	// NextVersion returns the version of a write at k, whose committed
	// state the transaction read at version read (0 if it did not read
	// one).
	NextVersion(k backend.Key, read backend.Version) backend.Version
}

// A Buffer is an optimistic transaction: Get reads through its Source and
// records what it saw first at each key, and Create, Put, Update and Delete
// check their conditions against what the transaction sees and keep the
// writes for the commit, which is the backend's: it sends the Writes,
// requiring the Reads unchanged. A backend's Tx embeds a Buffer and adds As.
//
// A Buffer is for one attempt: Init it, hand it to fn, Close it. It is not
// safe for concurrent use, and it must not be copied after Init.
type Buffer struct {
	Gate
	src      Source
	store    string
	now      func() time.Time
	maxBytes int
	mode     Mode

	reads    keyedList[Read]
	writes   keyedList[Write]
	opts     backend.WriteOptions // the options of the write being made
	readBuf  [4]Read
	writeBuf [2]Write
}

// Mode is how a Buffer reads and creates.
type Mode struct {
	// Snapshot answers every look at a key after the first from that first
	// read (one read per key and attempt). Without it, each look reads the
	// committed state again (the first read is still the one the commit
	// requires unchanged), so that a conditional write meets a concurrent
	// commit at once, not at the commit.
	Snapshot bool
	// DeferCreates lets a Create with [backend.CreateAtCommit] of a key the
	// transaction has neither read nor written read nothing: its write is
	// marked AtCommit, for the commit to check.
	DeferCreates bool
}

// Init readies b for an attempt on src in mode m, with o's clock and
// document limit (store names the store in errors).
func (b *Buffer) Init(store string, src Source, o Options, m Mode) {
	b.src, b.store, b.now, b.maxBytes, b.mode = src, store, o.Now, o.MaxDocumentBytes, m
	b.reads.items, b.writes.items = b.readBuf[:0], b.writeBuf[:0]
}

// Reads returns what the transaction read, one per key, in the order it
// first read them.
func (b *Buffer) Reads() []Read { return b.reads.items }

// Writes returns the transaction's writes, one per key, in the order it
// first wrote them. The commit may change them in place.
func (b *Buffer) Writes() []Write { return b.writes.items }

// ReadOf returns what the transaction read at k, or nil.
func (b *Buffer) ReadOf(k backend.Key) *Read { return b.reads.find(k) }

// WriteOf returns the transaction's write at k, or nil.
func (b *Buffer) WriteOf(k backend.Key) *Write { return b.writes.find(k) }

// SetRead records d as read at k, in place of an earlier read: for a
// commit that reads an AtCommit write's key itself.
func (b *Buffer) SetRead(k backend.Key, d Doc) {
	if r := b.reads.find(k); r != nil {
		r.Doc = d
		return
	}
	b.reads.add(Read{Key: k, Doc: d})
}

// read returns the committed state at k (in Snapshot mode, as first read),
// recording the first read.
func (b *Buffer) read(ctx context.Context, k backend.Key) (Doc, error) {
	r := b.reads.find(k)
	if r != nil && b.mode.Snapshot {
		return r.Doc, nil
	}
	d, err := b.src.ReadDoc(ctx, k)
	if err != nil {
		return Doc{}, err
	}
	if r == nil {
		b.reads.add(Read{Key: k, Doc: d})
	}
	return d, nil
}

// view returns the state the transaction sees at k: its own write if any,
// else the committed document.
func (b *Buffer) view(ctx context.Context, k backend.Key) (data []byte, v backend.Version, live bool, err error) {
	w := b.writes.find(k)
	if w != nil && !w.AtCommit {
		if w.Data == nil {
			return nil, 0, false, nil
		}
		w.Observed = true
		return w.Data, w.Version, backend.Live(w.ExpiresAt, b.now()), nil
	}
	d, err := b.read(ctx, k)
	if err != nil {
		return nil, 0, false, err
	}
	if w != nil {
		// Read after its CreateAtCommit: the Create takes effect only
		// over an absent document, as a Create checked at once would.
		if d.Live(b.now()) {
			return nil, 0, false, fmt.Errorf("%w: %s created at commit over a live document", backend.ErrConflict, k)
		}
		w.AtCommit, w.Version, w.Observed = false, b.src.NextVersion(k, d.Version), true
		return w.Data, w.Version, backend.Live(w.ExpiresAt, b.now()), nil
	}
	return d.Data, d.Version, d.Live(b.now()), nil
}

// current returns the version of the live document the transaction sees
// at k, or ErrNotFound.
func (b *Buffer) current(ctx context.Context, k backend.Key) (backend.Version, error) {
	_, v, live, err := b.view(ctx, k)
	if err != nil {
		return 0, err
	}
	if !live {
		return 0, backend.ErrNotFound
	}
	return v, nil
}

// put records a write of data (nil: a delete) at k with b.opts, in place
// of an earlier write there.
func (b *Buffer) put(k backend.Key, data []byte, atCommit bool) {
	var read backend.Version
	if r := b.reads.find(k); r != nil {
		read = r.Version
	}
	w := Write{Key: k, Data: data, Version: b.src.NextVersion(k, read), ExpiresAt: b.opts.ExpiresAt, AtCommit: atCommit}
	if p := b.writes.find(k); p != nil {
		*p = w
		return
	}
	b.writes.add(w)
}

// setOpts applies opts into b.opts: backend.ApplyWriteOptions's result
// would be allocated (its address goes to the options).
func (b *Buffer) setOpts(opts []backend.WriteOption) {
	b.opts = backend.WriteOptions{}
	for _, f := range opts {
		if f != nil {
			f(&b.opts)
		}
	}
}

// Get implements [backend.Tx].
func (b *Buffer) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := b.Check(k); err != nil {
		return 0, err
	}
	data, v, live, err := b.view(ctx, k)
	if err != nil {
		return 0, err
	}
	if !live {
		return 0, backend.ErrNotFound
	}
	if dst != nil {
		if err := json.Unmarshal(data, dst); err != nil {
			return 0, fmt.Errorf("%s: decoding %s: %w", b.store, k, err)
		}
	}
	return v, nil
}

// Create implements [backend.Tx].
func (b *Buffer) Create(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	data, err := b.CheckWrite(k, doc, b.maxBytes)
	if err != nil {
		return err
	}
	b.setOpts(opts)
	if b.opts.AtCommit && b.mode.DeferCreates && b.writes.find(k) == nil && b.reads.find(k) == nil {
		// Not read: the commit checks that no live document is there.
		b.put(k, data, true)
		return nil
	}
	_, _, live, err := b.view(ctx, k)
	if err != nil {
		return err
	}
	if live {
		return backend.ErrExists
	}
	b.put(k, data, false)
	return nil
}

// Put implements [backend.Tx].
func (b *Buffer) Put(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	data, err := b.CheckWrite(k, doc, b.maxBytes)
	if err != nil {
		return err
	}
	b.setOpts(opts)
	b.put(k, data, false)
	return nil
}

// Update implements [backend.Tx].
func (b *Buffer) Update(ctx context.Context, k backend.Key, v backend.Version, doc any, opts ...backend.WriteOption) error {
	data, err := b.CheckWrite(k, doc, b.maxBytes)
	if err != nil {
		return err
	}
	cur, err := b.current(ctx, k)
	if err != nil {
		return err
	}
	if cur != v {
		return backend.ErrConflict
	}
	b.setOpts(opts)
	b.put(k, data, false)
	return nil
}

// Delete implements [backend.Tx].
func (b *Buffer) Delete(ctx context.Context, k backend.Key, v backend.Version) error {
	if err := b.Check(k); err != nil {
		return err
	}
	cur, err := b.current(ctx, k)
	if err != nil {
		return err
	}
	if v != 0 && cur != v {
		return backend.ErrConflict
	}
	b.opts = backend.WriteOptions{}
	b.put(k, nil, false)
	return nil
}
