package idem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
)

// A quota bounds the bytes of the answers one scope keeps
// (Options.MaxStoredBytes). Each scope has a usage document that counts
// them in buckets by when they expire; a bucket's bytes stop counting once
// its answers have all expired, at most width after the first of them.
type quota struct {
	max   int64
	width time.Duration
}

// newQuota is the quota of limit bytes for answers kept for ttl, or nil
// for no bound (limit 0).
func newQuota(limit int64, ttl time.Duration) *quota {
	if limit == 0 {
		return nil
	}
	return &quota{max: limit, width: max(ttl/16, time.Second).Truncate(time.Second)} // whole seconds, as buckets are kept
}

// A usageChange is bytes a scope keeps from now until expires, or, when
// negative, bytes it no longer keeps that were counted until expires.
type usageChange struct {
	bytes   int64
	expires time.Time
}

// charge counts, in tx, what scope keeps more or no longer keeps. With
// check, changes that would take the scope past the bound count nothing
// and return quota_exceeded, which rolls tx back.
func (q *quota) charge(ctx context.Context, tx Tx, scope string, now time.Time, check bool, changes ...usageChange) error {
	k := oprecord.UsageKey(scope)
	var u oprecord.Usage
	// Put writes what Get read changed: the transaction, serializable on
	// every store, makes two calls at once take turns on it.
	if _, err := tx.Get(ctx, k, &u); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	u.Buckets = slices.DeleteFunc(u.Buckets, func(b oprecord.UsageBucket) bool { return b.Until <= now.Unix() })
	var held, n int64
	for _, b := range u.Buckets {
		held += b.Bytes
	}
	for _, c := range changes {
		n += c.bytes
	}
	if check && n > 0 && held+n > q.max {
		return q.refusal(u.Buckets, held, n, now)
	}
	for _, c := range changes {
		until := c.expires.Truncate(q.width).Add(q.width).Unix() // the end of expires' bucket
		i, ok := slices.BinarySearchFunc(u.Buckets, until, func(b oprecord.UsageBucket, t int64) int { return cmp.Compare(b.Until, t) })
		switch {
		case !ok && c.bytes < 0:
			continue // its bucket has expired: nothing of it is counted
		case !ok:
			u.Buckets = slices.Insert(u.Buckets, i, oprecord.UsageBucket{Until: until})
		}
		u.Buckets[i].Bytes = max(u.Buckets[i].Bytes+c.bytes, 0)
	}
	u.Buckets = slices.DeleteFunc(u.Buckets, func(b oprecord.UsageBucket) bool { return b.Bytes == 0 })
	last := now.Add(q.width) // the document expires with its last bucket
	if len(u.Buckets) > 0 {
		last = time.Unix(u.Buckets[len(u.Buckets)-1].Until, 0)
	}
	return tx.Put(ctx, k, &u, backend.WithExpiry(last))
}

// refusal is the quota_exceeded answer to n more bytes for a scope holding
// held in buckets: when to retry, or that retrying cannot help.
func (q *quota) refusal(buckets []oprecord.UsageBucket, held, n int64, now time.Time) *Error {
	if n > q.max {
		return newError(CodeQuotaExceeded, "this answer is larger than the server keeps for one caller; nothing was saved, and a retry cannot succeed: ask the server's operator")
	}
	// The bytes fit once enough buckets, the earliest first, have expired;
	// with n within the bound, they do by the last one.
	var until int64
	for _, b := range buckets {
		if until, held = b.Until, held-b.Bytes; held+n <= q.max {
			break
		}
	}
	wait := time.Unix(until, 0).Sub(now).Round(time.Second)
	return newError(CodeQuotaExceeded, fmt.Sprintf("this caller's kept answers have reached the server's bound; nothing was saved; retry in %s, when older answers have expired", wait))
}
