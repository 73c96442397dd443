package merge

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"time"
)

// A Rule joins two states of one record into one. To be a merge rule it must
// be a join (the least upper bound of a semilattice):
//
//   - commutative: rule(a, b) equals rule(b, a);
//   - associative: rule(rule(a, b), c) equals rule(a, rule(b, c));
//   - idempotent: rule(a, a) equals a.
//
// Then any arrival order of the same set of attempts, with any of them
// repeated, folds to the same record. Two values are equal when their
// encoding/json encodings are byte-equal: records are stored as JSON, so that
// is the equality a reader of the store sees.
// [github.com/idemkit/sdk/merge/mergetest.Check] verifies the three laws.
//
// A Rule must not modify its arguments and must be deterministic: no clock,
// no randomness, no dependence on map iteration order.
type Rule[T any] func(a, b T) T

// Earliest keeps the earlier of two instants. Two times at the same instant
// but in different locations are told apart by their RFC 3339 text, so the
// result does not depend on argument order. The zero time is an ordinary,
// very early instant: use [Optional] with a *time.Time for "not set yet".
// The result carries no monotonic clock reading.
func Earliest(a, b time.Time) time.Time {
	a, b = a.Round(0), b.Round(0)
	if c := a.Compare(b); c != 0 {
		if c < 0 {
			return a
		}
		return b
	}
	return lowerText(a, b)
}

// Latest keeps the later of two instants, with the same tie-breaking and
// zero-time caveat as [Earliest].
func Latest(a, b time.Time) time.Time {
	a, b = a.Round(0), b.Round(0)
	if c := a.Compare(b); c != 0 {
		if c > 0 {
			return a
		}
		return b
	}
	return lowerText(a, b)
}

// lowerText picks one of two equal instants by their text form.
func lowerText(a, b time.Time) time.Time {
	if a.Format(time.RFC3339Nano) <= b.Format(time.RFC3339Nano) {
		return a
	}
	return b
}

// Min keeps the smaller of two ordered values (as [cmp.Compare] orders them,
// so a NaN is the smallest float). Of two values that compare equal but are
// not identical (-0.0 and +0.0) it keeps the one whose text sorts first.
func Min[T cmp.Ordered](a, b T) T {
	switch c := cmp.Compare(a, b); {
	case c < 0:
		return a
	case c > 0:
		return b
	}
	return lowerSprint(a, b)
}

// Max keeps the larger of two ordered values, with the same ordering and
// tie-breaking as [Min].
func Max[T cmp.Ordered](a, b T) T {
	switch c := cmp.Compare(a, b); {
	case c > 0:
		return a
	case c < 0:
		return b
	}
	return lowerSprint(a, b)
}

func lowerSprint[T any](a, b T) T {
	if fmt.Sprintf("%#v", a) <= fmt.Sprintf("%#v", b) {
		return a
	}
	return b
}

// Priority returns a rule that keeps the higher-ranked of two values: order
// lists the values from highest to lowest rank, so Priority("done",
// "abandoned") makes done beat any other outcome. A value missing from order
// ranks below every listed one; between two values of one rank (two
// unlisted ones, or -0 and +0) the one whose JSON encoding sorts first wins,
// as with [Lowest]. A value listed twice takes its first rank.
func Priority[V comparable](order ...V) Rule[V] {
	rank := make(map[V]int, len(order))
	for i, v := range order {
		if _, dup := rank[v]; !dup {
			rank[v] = len(order) - i // higher is better; unlisted is 0
		}
	}
	return func(a, b V) V {
		ra, rb := rank[a], rank[b]
		switch {
		case ra > rb:
			return a
		case rb > ra:
			return b
		}
		return tie(a, b)
	}
}

// Lowest returns a rule that keeps whichever value's JSON encoding sorts
// first (bytewise). It is a deterministic pick between values that ought to
// be equal, such as two copies of one attempt under the same op id. Values
// that do not encode are compared by their Go syntax (%#v) instead.
func Lowest[T any]() Rule[T] { return tie[T] }

// tie keeps whichever value's JSON encoding sorts first, or, for values that
// do not encode, whichever Go syntax sorts first.
func tie[T any](a, b T) T {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return lowerSprint(a, b)
	}
	if bytes.Compare(ja, jb) <= 0 {
		return a
	}
	return b
}

// Union returns a rule over sets of attempts keyed by id (an op id, say):
// the result holds every key of both maps, and a key present in both holds
// same(a[k], b[k]). The result is a new map; the arguments are not modified.
//
// An empty result is nil if either argument is nil and an empty non-nil map
// otherwise, so that the rule stays a join under JSON equality (nil encodes
// as null, an empty map as {}).
func Union[K comparable, V any](same Rule[V]) Rule[map[K]V] {
	return func(a, b map[K]V) map[K]V {
		if len(a) == 0 && len(b) == 0 {
			if a == nil || b == nil {
				return nil
			}
			return map[K]V{}
		}
		out := make(map[K]V, len(a)+len(b))
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			if w, ok := out[k]; ok {
				out[k] = same(w, v)
			} else {
				out[k] = v
			}
		}
		return out
	}
}

// Optional lifts a rule to pointers: nil (absent) joins to the other value,
// and two present values join with rule. The result points to a new value
// unless it is one of the arguments unchanged.
func Optional[T any](rule Rule[T]) Rule[*T] {
	return func(a, b *T) *T {
		switch {
		case a == nil:
			return b
		case b == nil:
			return a
		}
		v := rule(*a, *b)
		return &v
	}
}

// A FieldRule joins one field of a struct T; make one with [Field] and
// combine them with [Struct].
type FieldRule[T any] struct {
	join func(dst, a, b *T)
}

// Field returns the rule for one field of T: get returns a pointer to the
// field inside the struct it is given, and rule joins the field's values.
//
//	merge.Field(func(s *Session) *time.Time { return &s.Start }, merge.Earliest)
func Field[T, F any](get func(*T) *F, rule Rule[F]) FieldRule[T] {
	return FieldRule[T]{join: func(dst, a, b *T) {
		*get(dst) = rule(*get(a), *get(b))
	}}
}

// Struct returns the field-wise product of rules: the result starts from the
// zero T and each field named by a FieldRule holds that field's join. A
// product of joins is a join. Fields without a rule are zero in the result,
// so [github.com/idemkit/sdk/merge/mergetest.Check] reports a rule that
// forgets one (its idempotence fails); fill derived fields with [View].
func Struct[T any](fields ...FieldRule[T]) Rule[T] {
	return func(a, b T) T {
		var out T
		for _, f := range fields {
			f.join(&out, &a, &b)
		}
		return out
	}
}

// View returns rule followed by view: a record built as "the attempts plus a
// deterministic view of them". When rule ignores the fields view fills in,
// and view depends only on the fields rule joins, the result is a join on
// records that are their own view (view(x) == x), which are the only records
// Apply stores.
func View[T any](rule Rule[T], view func(T) T) Rule[T] {
	return func(a, b T) T { return view(rule(a, b)) }
}
