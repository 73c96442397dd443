package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// runConsistency checks promises that only overlapping transactions reveal:
// versions only go up, and fn never answers from reads no single state held.
func runConsistency(t *testing.T, h Harness) {
	ctx := context.Background()
	k := idem.Key{Collection: "consistency", ID: "k"}

	t.Run("VersionsOnlyRiseUnderBlindWrites", func(t *testing.T) {
		t.Parallel()
		s := h.New(t, time.Now)
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, doc{N: 0}) }); err != nil {
			t.Fatal(err)
		}
		var second idem.Version
		first := true
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, k, doc{N: 1}); err != nil {
				return err
			}
			if first {
				first = false
				// Another transaction writes k and commits meanwhile (on
				// stores that run one transaction at a time it waits, and
				// commits after this one).
				done := make(chan error, 1)
				go func() {
					// Another caller: not fn's context.
					done <- s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, doc{N: 2}) })
				}()
				select {
				case err := <-done:
					if err != nil {
						return err
					}
					second = version(t, s, k)
				case <-time.After(200 * time.Millisecond):
					t.Cleanup(func() { <-done })
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if final := version(t, s, k); second != 0 && final < second {
			t.Errorf("version went down from %d to %d", second, final)
		}
	})

	t.Run("NoAnswerFromInconsistentReads", func(t *testing.T) {
		t.Parallel()
		s := h.New(t, time.Now)
		k1, k2 := idem.Key{Collection: "consistency", ID: "k1"}, idem.Key{Collection: "consistency", ID: "k2"}
		errBroken := errors.New("k1 absent but k2 present: no state ever held both")
		first := true
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			_, err1 := tx.Get(ctx, k1, nil)
			if first {
				first = false
				done := make(chan error, 1)
				go func() {
					done <- s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
						if err := tx.Create(ctx, k1, doc{N: 1}); err != nil {
							return err
						}
						return tx.Create(ctx, k2, doc{N: 1})
					})
				}()
				select {
				case err := <-done:
					if err != nil {
						return err
					}
				case <-time.After(200 * time.Millisecond):
					t.Cleanup(func() { <-done })
				}
			}
			_, err2 := tx.Get(ctx, k2, nil)
			if errors.Is(err1, idem.ErrNotFound) && err2 == nil {
				return errBroken
			}
			return nil
		})
		if err != nil {
			t.Errorf("Run = %v; a transaction whose reads changed underneath must run again, not answer", err)
		}
	})

	// Two doctors on call, each transaction taking one off only if both
	// are on: each reads both documents and writes one, so only the
	// check at commit of the document it read and did not write (a
	// DynamoDB ConditionCheck, Firestore's read again, PostgreSQL's
	// serializable isolation) keeps one doctor on call.
	t.Run("NoWriteSkew", func(t *testing.T) {
		t.Parallel()
		s := h.New(t, time.Now)
		ka, kb := idem.Key{Collection: "consistency", ID: "on-call-a"}, idem.Key{Collection: "consistency", ID: "on-call-b"}
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return errors.Join(tx.Create(ctx, ka, doc{N: 1}), tx.Create(ctx, kb, doc{N: 1}))
		}); err != nil {
			t.Fatal(err)
		}
		// offDuty takes me off call if both are on; between its reads
		// and its write, meanwhile runs once.
		offDuty := func(me, other idem.Key, meanwhile func() error) error {
			return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				var mine, theirs doc
				v, err := tx.Get(ctx, me, &mine)
				if err != nil {
					return err
				}
				if _, err := tx.Get(ctx, other, &theirs); err != nil {
					return err
				}
				if meanwhile != nil {
					if err := meanwhile(); err != nil {
						return err
					}
					meanwhile = nil
				}
				if mine.N+theirs.N < 2 {
					return nil
				}
				return tx.Update(ctx, me, v, doc{N: 0})
			})
		}
		err := offDuty(ka, kb, func() error {
			// The other doctor's transaction commits meanwhile (on stores
			// that run one transaction at a time it waits, and commits
			// after this one).
			wait := 10 * time.Second
			if h.Serialized {
				wait = 200 * time.Millisecond
			}
			done := make(chan error, 1)
			go func() { done <- offDuty(kb, ka, nil) }()
			select {
			case err := <-done:
				return err
			case <-time.After(wait):
				t.Cleanup(func() {
					if err := <-done; err != nil {
						t.Errorf("the other doctor's transaction: %v", err)
					}
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var a, b doc
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			_, errA := tx.Get(ctx, ka, &a)
			_, errB := tx.Get(ctx, kb, &b)
			return errors.Join(errA, errB)
		}); err != nil {
			t.Fatal(err)
		}
		if a.N+b.N != 1 {
			t.Errorf("on call after both transactions: a=%d b=%d, want exactly one", a.N, b.N)
		}
	})

	t.Run("SweepRefusesANonPositiveLimit", func(t *testing.T) {
		t.Parallel()
		if !h.Sweeper {
			t.Skip("the harness declares no backend.Sweeper")
		}
		sw := capability[backend.Sweeper](t, h.New(t, time.Now))
		for _, limit := range []int{0, -1} {
			if _, err := sw.Sweep(ctx, limit); err == nil {
				t.Errorf("Sweep(%d) = nil error", limit)
			}
		}
	})
}

func version(t *testing.T, s idem.Store, k idem.Key) idem.Version {
	t.Helper()
	var v idem.Version
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		v, err = tx.Get(ctx, k, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
