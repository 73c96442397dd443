// Package merge joins states of one record that several devices can write
// with different intents and different keys, so that the record ends the
// same whatever order their requests arrive in.
//
// A phone stops a focus session at 14:05 while offline; a laptop stops it at
// 14:20 online; the phone's request arrives last. No idempotency key dedups
// the two: they are two operations. A merge [Rule] decides, and because a
// rule is a join (commutative, associative, idempotent), both arrival orders
// give the same record:
//
//	rule := merge.View(merge.Struct(
//		merge.Field(func(s *Session) *map[string]Stop { return &s.Stops },
//			merge.Union[string](merge.Lowest[Stop]())),
//	), view) // view: End, Outcome, Summary, Notes from Stops
//
//	err := store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
//		ch, err := merge.Apply(ctx, tx, key, incoming, rule, &merge.Options[Session]{Describe: describeStop})
//		// ch.Summary: "shortened: end moved from 14:20 to 14:05"
//		return err
//	})
//
// Build records as "the set of attempts plus a deterministic view of it":
// keep every attempt, keyed by its op id ([Union]), and compute the fields a
// reader looks at from that set alone ([View]). A union of sets is a join,
// and a deterministic function of the set is the same in every order, so the
// laws follow. The built-ins ([Earliest], [Latest], [Min], [Max],
// [Priority], [Lowest], [Union], [Optional], [Struct] with [Field], [View])
// are joins and compose into joins.
//
// Package [github.com/idemkit/sdk/merge/mergetest] verifies a rule's laws
// on generated values (with pgregory.net/rapid, which shrinks a failure to a
// small counter-example) and that every arrival order of a generated set of
// attempts folds to the same value: run its Check in the tests of every rule
// you ship; its Verify is the same check returning an error. The checker
// lives apart so that package merge imports neither testing nor rapid, and a
// server using merge rules gains no test flags.
//
// [Apply] runs a rule inside an [idem.Tx]: it reads the record, joins, writes
// only if the JSON changed (conditionally on the version it read, so a
// concurrent merge makes the transaction retry), and returns the [Change].
//
// The focus-session stop rule is worked through in the package example.
package merge
