package mergetest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/merge/mergetest"
)

// lastArrivalWins is last-writer-wins by arrival: the value that comes second
// replaces the first.
func lastArrivalWins(a, b int) int { return b }

// appendAll appends the attempts it sees to a list, in arrival order.
func appendAll(a, b []int) []int { return append(slices.Clone(a), b...) }

func TestVerifyRejectsBrokenRules(t *testing.T) {
	ints := rapid.IntRange(0, 1000)
	cases := []struct {
		name string
		err  error
		law  string
	}{
		{"last writer by arrival", mergetest.Verify(lastArrivalWins, ints), "commutative"},
		{"append to a list", mergetest.Verify(appendAll, rapid.SliceOfN(ints, 0, 4)), "commutative"},
		{"append to a list, idempotence", mergetest.Verify(
			// Commutative and associative on single-element lists, but not idempotent.
			func(a, b []int) []int { return slices.Sorted(slices.Values(appendAll(a, b))) },
			rapid.SliceOfN(ints, 1, 1)), "idempotent"},
		{"subtraction", mergetest.Verify(func(a, b int) int { return a - b }, ints), "commutative"},
		{"average", mergetest.Verify(func(a, b float64) float64 { return (a + b) / 2 },
			rapid.Float64Range(-100, 100)), "associative"},
		{"mutates its argument", mergetest.Verify(func(a, b map[string]int) map[string]int {
			for k, v := range b {
				a[k] = max(a[k], v)
			}
			return a
		}, rapid.MapOfN(rapid.SampledFrom([]string{"a", "b"}), ints, 1, 2)), "pure"},
		{"panics", mergetest.Verify(func(a, b int) int { return a / (b - b) }, ints), "pure"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var le *mergetest.LawError
			if !errors.As(c.err, &le) {
				t.Fatalf("Verify = %v, want a *mergetest.LawError", c.err)
			}
			if le.Law != c.law {
				t.Errorf("law = %q, want %q\n%v", le.Law, c.law, c.err)
			}
			if !strings.Contains(c.err.Error(), "merge: rule is not "+c.law) || le.Example == "" {
				t.Errorf("message does not name the law and a counter-example:\n%v", c.err)
			}
		})
	}
}

// TestVerifyShrinks checks that the counter-example is the smallest one:
// last-writer-wins on 0..1000 breaks commutativity first on 0 and 1.
func TestVerifyShrinks(t *testing.T) {
	err := mergetest.Verify(lastArrivalWins, rapid.IntRange(0, 1000))
	var le *mergetest.LawError
	if !errors.As(err, &le) {
		t.Fatalf("Verify = %v, want a *mergetest.LawError", err)
	}
	want := "a = 0\nb = 1\nrule(a, b) = 1\nrule(b, a) = 0"
	if le.Example != want && le.Example != "a = 1\nb = 0\nrule(a, b) = 0\nrule(b, a) = 1" {
		t.Errorf("counter-example:\n%s\nwant:\n%s", le.Example, want)
	}
}

func TestVerifyOrderIndependence(t *testing.T) {
	// Commutative, idempotent, but not associative: it keeps the
	// midpoint-rounded value, so three attempts fold differently by order.
	rule := func(a, b int) int {
		if a == b {
			return a
		}
		return (a + b) / 2
	}
	err := mergetest.Verify(rule, rapid.IntRange(0, 8))
	var le *mergetest.LawError
	if !errors.As(err, &le) || (le.Law != "associative" && le.Law != "order-independent") {
		t.Fatalf("Verify = %v, want associativity or order independence broken", err)
	}
}

func TestVerifyBadInput(t *testing.T) {
	if err := mergetest.Verify[int](nil, rapid.IntRange(0, 1)); err == nil {
		t.Error("Verify(nil rule) = nil")
	}
	if err := mergetest.Verify(merge.Max[int], nil); err == nil {
		t.Error("Verify(nil generator) = nil")
	}
}

// fakeTB records Check's verdict instead of failing the test.
type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatal(args ...any)     { f.failed, f.msg = true, fmt.Sprint(args...) }
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }

func TestCheckFailsTheTest(t *testing.T) {
	f := &fakeTB{TB: t}
	mergetest.Check(f, lastArrivalWins, rapid.IntRange(0, 10))
	if !f.failed || !strings.Contains(f.msg, "not commutative") {
		t.Errorf("Check on last-writer-wins: failed=%v msg=%q", f.failed, f.msg)
	}
	f = &fakeTB{TB: t}
	mergetest.Check(f, appendAll, rapid.SliceOfN(rapid.IntRange(0, 10), 0, 3))
	if !f.failed || !strings.Contains(f.msg, "merge: rule is not") {
		t.Errorf("Check on append: failed=%v msg=%q", f.failed, f.msg)
	}
	f = &fakeTB{TB: t}
	mergetest.Check(f, merge.Max[int], rapid.IntRange(0, 10))
	if f.failed {
		t.Errorf("Check on Max failed: %s", f.msg)
	}
}
