package sideeffect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/idemkit/sdk/idem"
)

// The store contract has no query, so open markers (pending, claimed,
// unknown) are found through index documents written in the same
// transaction as the marker: a marker key is added by Intend and removed when
// the marker is done.
//
// The index is split into indexShards shards by a hash of the key, so that
// writes of different markers seldom touch the same index document. A shard
// is a head document and a set of page documents of bounded size:
//
//   - the head (open.NN) names the shard's live pages and the current page,
//     the one new keys are appended to;
//   - a page (open.NN.P) holds at most pageBytes of encoded keys.
//
// Intend reads the head and the current page and writes the page; only when
// that page is full does it open a new one and rewrite the head. The marker
// records the number of the page that holds its key, so removing the key
// reads and writes that page only; a page other than the current one that
// becomes empty is deleted and dropped from the head. So the work of one
// Intend or removal is bounded whatever the backlog, and no document grows
// past pageBytes except a head, which holds one number per live page.
//
// The shard count and the page format are part of the stored format: every
// process sharing a store must use the same ones.
const (
	indexCollection = "idem_marker_index"
	indexShards     = 16
	// pageBytes bounds the encoded keys of one page: well under DynamoDB's
	// 400 KB item limit, and small enough that rewriting a page is cheap
	// (DynamoDB charges a write unit per KB).
	pageBytes = 16 << 10
	// readBatch bounds the documents one read transaction touches (DynamoDB
	// checks every read at commit and allows 100 items per transaction).
	readBatch = 25
)

// headDoc is a shard's head. Pages are numbered from 1; Next is the number
// the next new page gets.
type headDoc struct {
	Cur   int   `json:"cur"`
	Next  int   `json:"next"`
	Pages []int `json:"pages"`
}

// pageDoc is one page of a shard: open marker keys, in the order added.
type pageDoc struct {
	Keys []string `json:"keys"`
}

func shardOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % indexShards)
}

func headID(shard int) idem.Key {
	return idem.Key{Collection: indexCollection, ID: fmt.Sprintf("head.%02d", shard)}
}

func pageID(shard, page int) idem.Key {
	return idem.Key{Collection: indexCollection, ID: fmt.Sprintf("open.%02d.%d", shard, page)}
}

// encodedLen is the number of bytes key takes in a page: its JSON string
// and a separator.
func encodedLen(key string) int {
	b, _ := json.Marshal(key) // a string always encodes
	return len(b) + 1
}

func (p *pageDoc) fits(key string) bool {
	n := encodedLen(key)
	for _, k := range p.Keys {
		n += encodedLen(k)
	}
	return n <= pageBytes
}

func indexErr(err error) error {
	if errors.Is(err, idem.ErrExists) || errors.Is(err, idem.ErrNotFound) {
		// A concurrent Intend created the head or page this transaction
		// found absent, or completions deleted the page it read: the store
		// runs the transaction again.
		return fmt.Errorf("sideeffect: writing marker index: %w", idem.ErrConflict)
	}
	return fmt.Errorf("sideeffect: writing marker index: %w", err)
}

// indexSlot reads, in tx, where key would be added to the index. It returns
// the page number to record in the marker and a function that writes the
// entry; it writes nothing itself, so a caller that then finds the marker
// already there leaves the index alone.
func indexSlot(ctx context.Context, tx idem.Tx, key string) (int, func() error, error) {
	shard := shardOf(key)
	hk := headID(shard)
	var h headDoc
	hv, err := tx.Get(ctx, hk, &h)
	if errors.Is(err, idem.ErrNotFound) {
		write := func() error {
			if err := tx.Create(ctx, hk, headDoc{Cur: 1, Next: 2, Pages: []int{1}}); err != nil {
				return indexErr(err)
			}
			if err := tx.Create(ctx, pageID(shard, 1), pageDoc{Keys: []string{key}}); err != nil {
				return indexErr(err)
			}
			return nil
		}
		return 1, write, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("sideeffect: reading marker index: %w", err)
	}
	pk := pageID(shard, h.Cur)
	var p pageDoc
	pv, err := tx.Get(ctx, pk, &p)
	if errors.Is(err, idem.ErrNotFound) {
		// The head named a page that is gone: between the two reads other
		// Intends moved the head on and completions drained and deleted
		// the page. The reads disagree; the store runs the transaction
		// again.
		return 0, nil, fmt.Errorf("sideeffect: marker index changed while read: %w", idem.ErrConflict)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("sideeffect: reading marker index: %w", err)
	}
	if p.fits(key) {
		write := func() error {
			p.Keys = append(p.Keys, key)
			if err := tx.Update(ctx, pk, pv, p); err != nil {
				return indexErr(err)
			}
			return nil
		}
		return h.Cur, write, nil
	}
	// The current page is full: open a new one.
	n := h.Next
	write := func() error {
		h.Cur = n
		h.Next = n + 1
		h.Pages = append(h.Pages, n)
		if err := tx.Update(ctx, hk, hv, h); err != nil {
			return indexErr(err)
		}
		if err := tx.Create(ctx, pageID(shard, n), pageDoc{Keys: []string{key}}); err != nil {
			return indexErr(err)
		}
		return nil
	}
	return n, write, nil
}

// indexRemove records key, held on page, as no longer open, in tx. Page 0
// means the key is not in the index.
func indexRemove(ctx context.Context, tx idem.Tx, key string, page int) error {
	if page == 0 {
		return nil
	}
	shard := shardOf(key)
	pk := pageID(shard, page)
	var p pageDoc
	pv, err := tx.Get(ctx, pk, &p)
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sideeffect: reading marker index: %w", err)
	}
	i := slices.Index(p.Keys, key)
	if i < 0 {
		return nil
	}
	p.Keys = slices.Delete(p.Keys, i, i+1)
	if len(p.Keys) > 0 {
		if err := tx.Update(ctx, pk, pv, p); err != nil {
			return indexErr(err)
		}
		return nil
	}
	// The page is empty: delete it unless new keys go there.
	hk := headID(shard)
	var h headDoc
	hv, err := tx.Get(ctx, hk, &h)
	if err != nil {
		return fmt.Errorf("sideeffect: reading marker index: %w", err)
	}
	if h.Cur == page {
		if err := tx.Update(ctx, pk, pv, p); err != nil {
			return indexErr(err)
		}
		return nil
	}
	h.Pages = slices.DeleteFunc(h.Pages, func(n int) bool { return n == page })
	if err := tx.Update(ctx, hk, hv, h); err != nil {
		return indexErr(err)
	}
	if err := tx.Delete(ctx, pk, pv); err != nil {
		return indexErr(err)
	}
	return nil
}

// openKeys returns the keys of all open markers, sorted. It reads the heads
// in one transaction and the pages in batches, so a key added meanwhile may
// be missed.
func openKeys(ctx context.Context, s idem.Store) ([]string, error) {
	type pageRef struct{ shard, page int }
	var pages []pageRef
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		pages = pages[:0]
		for i := range indexShards {
			var h headDoc
			_, err := tx.Get(ctx, headID(i), &h)
			if errors.Is(err, idem.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sideeffect: reading marker index: %w", err)
			}
			for _, p := range h.Pages {
				pages = append(pages, pageRef{i, p})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var keys []string
	for batch := range slices.Chunk(pages, readBatch) {
		var got []string
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			got = got[:0]
			for _, r := range batch {
				var p pageDoc
				_, err := tx.Get(ctx, pageID(r.shard, r.page), &p)
				if errors.Is(err, idem.ErrNotFound) {
					continue // emptied and deleted since the heads were read
				}
				if err != nil {
					return fmt.Errorf("sideeffect: reading marker index: %w", err)
				}
				got = append(got, p.Keys...)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		keys = append(keys, got...)
	}
	slices.Sort(keys)
	return keys, nil
}

// readOpen returns the open markers, in key order, reading at most readBatch
// markers per transaction.
func readOpen(ctx context.Context, s idem.Store, cfg config) ([]Marker, error) {
	keys, err := openKeys(ctx, s)
	if err != nil {
		return nil, err
	}
	out := make([]Marker, 0, len(keys))
	for batch := range slices.Chunk(keys, readBatch) {
		var got []Marker
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			got = got[:0]
			now := cfg.now()
			for _, key := range batch {
				k, err := markerKey(key)
				if err != nil {
					return err
				}
				d, _, err := load(ctx, tx, k)
				if errors.Is(err, ErrNoMarker) {
					continue
				}
				if err != nil {
					return err
				}
				if m := d.marker(key, now, cfg.grace()); m.State != Done {
					got = append(got, m)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

var errListState = errors.New("sideeffect: only pending, claimed and unknown markers can be listed")

// List returns the markers now in state, in key order: Pending (intended,
// not being posted), Claimed (being posted under a live lease) or Unknown
// (a claim ended without an outcome and reconcile has not settled it; these
// need a person or a reconcile function that can tell). Done markers are not
// listed; read one with [Effects.Get].
//
// List reads the index and the markers in batches, not in one transaction
// over all of them, so a marker may move while List runs, and one intended
// meanwhile may be missed.
func (e *Effects) List(ctx context.Context, state State) ([]Marker, error) {
	if state != Pending && state != Claimed && state != Unknown {
		return nil, errListState
	}
	all, err := readOpen(ctx, e.s, e.cfg)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(m Marker) bool { return m.State != state }), nil
}
