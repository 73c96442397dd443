// Package sideeffect makes an outbound effect of a write (a post to a social
// network, a webhook, an email, a payment) happen once: not twice when the
// write is repeated or two calls race, and not lost when the process dies
// between the commit and the post.
//
// A marker per effect is stored as a document in the same [idem.Store] as
// the write, through [idem.Tx] only, so it works on every backend:
//
//	pending -> claimed(token, lease) -> done(ref)
//
// Make one [Effects] for the store when the server starts:
//
//	effects := sideeffect.New(store, nil) // or &sideeffect.Options{Lease: ...}
//
// In a tool handler, intend the effect in the write's transaction and post
// it after the commit:
//
//	func publish(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Story) (*mcp.CallToolResult, Out, error) {
//		// ... write the story with tx ...
//		key := "story-post." + in.Slug
//		if err := effects.Intend(ctx, tx, key, in); err != nil {
//			return nil, Out{}, err
//		}
//		err := effects.PostAfterCommit(ctx, key, postToNetwork, nil)
//		return nil, Out{}, err
//	}
//
// [Effects.Once] claims the marker with a conditional write, posts with no
// transaction open, and records the external reference; a second caller
// gets that reference and does not post. A failed post releases the marker;
// a claim whose lease ends without an outcome becomes [Unknown] and is
// settled by [Effects.Recover], which asks a reconcile function about external
// truth and posts again only what did not happen. See docs/protect.md, "Side effects".
package sideeffect
