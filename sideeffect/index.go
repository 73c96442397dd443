package sideeffect

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/idemkit/sdk/idem"
)

// The store contract has no query, so open markers (pending, claimed,
// unknown) are found through index documents written in the same
// transaction as the marker: a marker key is added by Intend and removed when
// the marker is done. The index is split into indexShards documents by a
// hash of the key, so that writes of different markers seldom touch the same
// index document. The shard count is part of the stored format: every
// process sharing a store must use the same one.
const (
	indexCollection = "idem_marker_index"
	indexShards     = 16
	// readBatch bounds the documents one read transaction touches (DynamoDB
	// checks every read at commit and allows 100 items per transaction).
	readBatch = 25
)

type indexDoc struct {
	Keys []string `json:"keys"`
}

func shardKey(key string) idem.Key {
	h := fnv.New32a()
	h.Write([]byte(key))
	return shardID(int(h.Sum32() % indexShards))
}

func shardID(i int) idem.Key {
	return idem.Key{Collection: indexCollection, ID: fmt.Sprintf("open.%02d", i)}
}

// indexAdd records key as open, in tx.
func indexAdd(ctx context.Context, tx idem.Tx, key string) error {
	k := shardKey(key)
	var ix indexDoc
	v, err := tx.Get(ctx, k, &ix)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		err = tx.Create(ctx, k, indexDoc{Keys: []string{key}})
	case err != nil:
	default:
		i, found := slices.BinarySearch(ix.Keys, key)
		if found {
			return nil
		}
		ix.Keys = slices.Insert(ix.Keys, i, key)
		err = tx.Update(ctx, k, v, ix)
	}
	if err != nil {
		return fmt.Errorf("sideeffect: writing marker index: %w", err)
	}
	return nil
}

// indexRemove records key as no longer open, in tx.
func indexRemove(ctx context.Context, tx idem.Tx, key string) error {
	k := shardKey(key)
	var ix indexDoc
	v, err := tx.Get(ctx, k, &ix)
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	if err == nil {
		i, found := slices.BinarySearch(ix.Keys, key)
		if !found {
			return nil
		}
		ix.Keys = slices.Delete(ix.Keys, i, i+1)
		err = tx.Update(ctx, k, v, ix)
	}
	if err != nil {
		return fmt.Errorf("sideeffect: writing marker index: %w", err)
	}
	return nil
}

// openKeys returns the keys of all open markers, sorted.
func openKeys(ctx context.Context, s idem.Store) ([]string, error) {
	var keys []string
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		keys = keys[:0]
		for i := range indexShards {
			var ix indexDoc
			_, err := tx.Get(ctx, shardID(i), &ix)
			if errors.Is(err, idem.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sideeffect: reading marker index: %w", err)
			}
			keys = append(keys, ix.Keys...)
		}
		return nil
	})
	if err != nil {
		return nil, err
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
				if m := d.marker(key, now); m.State != Done {
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
// listed; read one with [Get].
//
// List reads a snapshot per batch of markers, not one transaction over all
// of them, so a marker may move while List runs.
func List(ctx context.Context, s idem.Store, state State, opts ...Option) ([]Marker, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if state != Pending && state != Claimed && state != Unknown {
		return nil, errListState
	}
	all, err := readOpen(ctx, s, cfg)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(m Marker) bool { return m.State != state }), nil
}
