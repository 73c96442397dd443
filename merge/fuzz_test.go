package merge_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/sdk/merge"
)

// FuzzRulesAreJoins checks the semilattice laws (commutative, associative,
// idempotent) of the rules on any values a caller can send: times, numbers,
// outcomes outside the priority order, sets of attempts. Equality is of the
// JSON encoding, as stored records are compared.
func FuzzRulesAreJoins(f *testing.F) {
	f.Add(int64(0), int64(1), int64(-1), "done", "abandoned", "")
	f.Add(int64(1<<62), int64(-1<<62), int64(7), "x", "done", "x")
	f.Add(int64(5), int64(5), int64(5), "paused", "paused", "abandoned")
	f.Fuzz(func(t *testing.T, a, b, c int64, s1, s2, s3 string) {
		ta, tb, tc := time.Unix(0, a).UTC(), time.Unix(0, b).UTC(), time.Unix(0, c).UTC()
		laws(t, "Earliest", merge.Rule[time.Time](merge.Earliest), ta, tb, tc)
		laws(t, "Latest", merge.Rule[time.Time](merge.Latest), ta, tb, tc)
		laws(t, "Min", merge.Rule[int64](merge.Min[int64]), a, b, c)
		laws(t, "Max", merge.Rule[int64](merge.Max[int64]), a, b, c)
		laws(t, "Priority", merge.Priority("done", "abandoned", "paused"), s1, s2, s3)
		laws(t, "Lowest", merge.Lowest[string](), s1, s2, s3)
		set := merge.Union[string](merge.Earliest)
		laws(t, "Union", set, map[string]time.Time{s1: ta, s2: tb}, map[string]time.Time{s2: tc}, map[string]time.Time{s3: ta, s1: tc})
		if got := merge.Earliest(ta, tb); got.After(ta) || got.After(tb) {
			t.Fatalf("Earliest(%v, %v) = %v, later than one of them", ta, tb, got)
		}
	})
}

// laws fails t unless rule is commutative, associative and idempotent on
// x, y, z.
func laws[T any](t *testing.T, name string, rule merge.Rule[T], x, y, z T) {
	t.Helper()
	eq := func(law string, p, q T) {
		t.Helper()
		pb, _ := json.Marshal(p)
		qb, _ := json.Marshal(q)
		if string(pb) != string(qb) {
			t.Fatalf("%s is not %s: %s != %s", name, law, pb, qb)
		}
	}
	eq("commutative", rule(x, y), rule(y, x))
	eq("associative", rule(rule(x, y), z), rule(x, rule(y, z)))
	eq("idempotent", rule(x, x), x)
}
