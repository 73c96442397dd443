package sideeffect_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/sideeffect"
	"github.com/idemkit/sdk/store/memory"
)

// A write intends its post in its own transaction and posts after the
// commit; repeating the write does not post again.
func Example() {
	ctx := context.Background()
	s := memory.New(nil)
	effects := sideeffect.New(s, nil)
	post := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		// Send key as the target's idempotency key.
		fmt.Printf("posting %s\n", payload)
		return "https://example.net/p/1", nil
	}
	publish := func() error {
		return idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			story := map[string]string{"slug": "hello", "title": "Hello"}
			if err := tx.Put(ctx, idem.Key{Collection: "stories", ID: "hello"}, story); err != nil {
				return err
			}
			if err := effects.Intend(ctx, tx, "story-post.hello", story); err != nil {
				return err
			}
			return effects.PostAfterCommit(ctx, "story-post.hello", post, func(ref string, err error) {
				fmt.Println("ref:", ref, err)
			})
		})
	}
	publish()
	publish()
	// Output:
	// posting {"slug":"hello","title":"Hello"}
	// ref: https://example.net/p/1 <nil>
	// ref: https://example.net/p/1 <nil>
}

// Recover, run at start-up and periodically, posts what was intended but
// never posted, and asks reconcile about claims that ended without an
// outcome.
func ExampleEffects_Recover() {
	ctx := context.Background()
	s := memory.New(nil)
	effects := sideeffect.New(s, nil)
	s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return effects.Intend(ctx, tx, "welcome-mail.u1", map[string]string{"to": "u1"})
	})
	// The process died here, before the after-commit post.

	post := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		return "msg-1", nil
	}
	reconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		// Ask the mail provider whether a message with idempotency key
		// m.Key exists.
		return sideeffect.CannotTell, "", nil
	}
	r, err := effects.Recover(ctx, post, reconcile)
	fmt.Println(r.Posted, err)
	m, _ := effects.Get(ctx, "welcome-mail.u1")
	fmt.Println(m.State, m.Ref)
	// Output:
	// [welcome-mail.u1] <nil>
	// done msg-1
}
