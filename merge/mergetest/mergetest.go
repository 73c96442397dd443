// Package mergetest checks that a [merge.Rule] is a join: commutative,
// associative and idempotent, with every arrival order of a set of attempts
// folding to the same value. It is meant for tests: it uses package testing
// and pgregory.net/rapid (which shrinks a failure to a small
// counter-example), and so registers rapid's -rapid.* flags. Package merge
// itself imports neither, so a server that uses merge rules does not gain
// those flags.
//
// Run [Check] in the tests of every rule you ship; [Verify] is the same
// check returning an error.
package mergetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/merge"
)

// A LawError reports a law a rule broke, with the smallest counter-example
// the checker found.
type LawError struct {
	// Law is "commutative", "associative", "idempotent", "order-independent",
	// "pure" (the rule modified an argument or panicked) or "json" (a
	// result does not survive a JSON round trip, so [merge.Apply] would store
	// something else).
	Law string
	// Example describes the counter-example: the values, as JSON, and what
	// the rule made of them.
	Example string
	// Seed reproduces the run with -rapid.seed, when rapid reported one.
	Seed string
}

func (e *LawError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "merge: rule is not %s\n%s", e.Law, e.Example)
	if e.Seed != "" {
		fmt.Fprintf(&b, "\n(reproduce with -rapid.seed=%s)", e.Seed)
	}
	return b.String()
}

// Check fails t (with t.Fatal) unless rule passes [Verify] on values drawn
// from gen. Use it in a server's tests for every rule it ships:
//
//	func TestStopRule(t *testing.T) {
//		mergetest.Check(t, stopRule, sessionGen())
//	}
//
// The failure message names the law that broke and the smallest
// counter-example found. As with rapid.Check, a failing case is saved
// under testdata/rapid and tried first on the next run, unless
// -rapid.nofailfile is set.
func Check[T any](t testing.TB, rule merge.Rule[T], gen *rapid.Generator[T]) {
	t.Helper()
	if err := verify(t.Name(), rule, gen); err != nil {
		t.Fatal(err)
	}
}

// Verify checks that rule is a join on values drawn from gen and returns nil
// or a *LawError. It checks, each on its own generated cases (rapid's
// default of 100 each, set with -rapid.checks):
//
//   - commutativity, associativity and idempotence;
//   - that every permutation of a generated set of 2 to 5 values folds
//     (left to right) to the same value;
//   - that the rule leaves its arguments unchanged and does not panic;
//   - that a result encodes to the same JSON after a decode (what
//     [merge.Apply] stores is what a reader gets back).
//
// The JSON law is checked first, so a value that cannot be stored (a NaN) is
// reported as such rather than as a broken algebraic law.
//
// Equality is byte equality of encoding/json encodings: what a store keeps.
// Fields that JSON does not encode (json:"-", unexported) are not compared,
// so a rule may let them depend on arrival order; keep such fields out of
// merged records, or out of what [merge.Options].Describe reports. gen should draw the
// values the rule will meet: records the rule could have produced, with
// collisions (equal times, equal ids) likely, since ties are where rules
// break. Counter-examples are shrunk by rapid. A nil rule or gen is an
// error.
func Verify[T any](rule merge.Rule[T], gen *rapid.Generator[T]) error {
	return verify("mergetest.Verify", rule, gen)
}

func verify[T any](name string, rule merge.Rule[T], gen *rapid.Generator[T]) error {
	if rule == nil {
		return errors.New("mergetest: Verify: rule is nil")
	}
	if gen == nil {
		return errors.New("mergetest: Verify: generator is nil")
	}
	laws := []struct {
		name string
		prop func(t *rapid.T, fail func(law, format string, args ...any))
	}{
		{"json", func(t *rapid.T, fail func(string, string, ...any)) {
			a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
			ab, ok := call(rule, a, b, fail)
			if !ok {
				return
			}
			enc, err := json.Marshal(ab)
			if err != nil {
				fail("json", "rule(a, b) does not encode as JSON: %v", err)
				return
			}
			var back T
			if err := json.Unmarshal(enc, &back); err != nil {
				fail("json", "rule(a, b) = %s does not decode: %v", enc, err)
				return
			}
			if again, _ := json.Marshal(back); !bytes.Equal(enc, again) {
				fail("json", "a = %s\nb = %s\nrule(a, b) = %s\nafter a decode it encodes as %s", js(a), js(b), enc, again)
			}
		}},
		{"commutative", func(t *rapid.T, fail func(string, string, ...any)) {
			a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
			ab, ok1 := call(rule, a, b, fail)
			ba, ok2 := call(rule, b, a, fail)
			if ok1 && ok2 && !same(ab, ba) {
				fail("commutative", "a = %s\nb = %s\nrule(a, b) = %s\nrule(b, a) = %s", js(a), js(b), js(ab), js(ba))
			}
		}},
		{"associative", func(t *rapid.T, fail func(string, string, ...any)) {
			a, b, c := gen.Draw(t, "a"), gen.Draw(t, "b"), gen.Draw(t, "c")
			ab, ok := call(rule, a, b, fail)
			if !ok {
				return
			}
			left, ok := call(rule, ab, c, fail)
			if !ok {
				return
			}
			bc, ok := call(rule, b, c, fail)
			if !ok {
				return
			}
			right, ok := call(rule, a, bc, fail)
			if ok && !same(left, right) {
				fail("associative", "a = %s\nb = %s\nc = %s\nrule(rule(a, b), c) = %s\nrule(a, rule(b, c)) = %s", js(a), js(b), js(c), js(left), js(right))
			}
		}},
		{"idempotent", func(t *rapid.T, fail func(string, string, ...any)) {
			a := gen.Draw(t, "a")
			aa, ok := call(rule, a, a, fail)
			if ok && !same(aa, a) {
				fail("idempotent", "a = %s\nrule(a, a) = %s", js(a), js(aa))
			}
		}},
		{"order-independent", func(t *rapid.T, fail func(string, string, ...any)) {
			set := rapid.SliceOfN(gen, 2, 5).Draw(t, "attempts")
			var first T
			var firstOrder []int
			ok := true
			permute(len(set), func(order []int) bool {
				acc := set[order[0]]
				for _, i := range order[1:] {
					if acc, ok = call(rule, acc, set[i], fail); !ok {
						return false
					}
				}
				if firstOrder == nil {
					first, firstOrder = acc, append([]int(nil), order...)
					return true
				}
				if !same(acc, first) {
					var b strings.Builder
					for i, v := range set {
						fmt.Fprintf(&b, "attempt %d = %s\n", i, js(v))
					}
					fail("order-independent", "%sorder %v folds to %s\norder %v folds to %s",
						b.String(), firstOrder, js(first), order, js(acc))
					return false
				}
				return true
			})
		}},
	}
	for _, law := range laws {
		var found *LawError
		rec := &recorder{name: name + "_" + law.name}
		rapid.Check(rec, func(t *rapid.T) {
			law.prop(t, func(l, format string, args ...any) {
				msg := fmt.Sprintf(format, args...)
				// The last failure rapid reports is its shrunk one.
				found = &LawError{Law: l, Example: msg}
				t.Fatalf("merge: rule is not %s\n%s", l, msg)
			})
		})
		if !rec.failed {
			continue
		}
		if found == nil { // rapid failed for its own reasons (a generator panicked)
			found = &LawError{Law: law.name, Example: rec.msg.String()}
		}
		if m := seedRE.FindStringSubmatch(rec.msg.String()); m != nil {
			found.Seed = m[1]
		}
		return found
	}
	return nil
}

var seedRE = regexp.MustCompile(`-rapid\.seed=(\d+)`)

// call runs rule(a, b), reporting a panic or a modified argument as a broken
// "pure" law. fail does not return.
func call[T any](rule merge.Rule[T], a, b T, fail func(string, string, ...any)) (T, bool) {
	ja, jb := js(a), js(b)
	out, p := protect(rule, a, b)
	if p != nil {
		fail("pure", "rule(a, b) panicked: %v\na = %s\nb = %s", p, ja, jb)
		return out, false
	}
	if js(a) != ja || js(b) != jb {
		fail("pure", "rule(a, b) modified an argument\na was %s, now %s\nb was %s, now %s", ja, js(a), jb, js(b))
		return out, false
	}
	return out, true
}

func protect[T any](rule merge.Rule[T], a, b T) (out T, p any) {
	defer func() { p = recover() }()
	return rule(a, b), nil
}

// same reports whether a and b encode to the same JSON. Values that do not
// encode are compared with reflect.DeepEqual.
func same[T any](a, b T) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return reflect.DeepEqual(a, b)
	}
	return bytes.Equal(ja, jb)
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v (no JSON: %v)", v, err)
	}
	return string(b)
}

// permute calls f with every permutation of 0..n-1 (Heap's algorithm) until
// f returns false.
func permute(n int, f func([]int) bool) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	c := make([]int, n)
	if !f(p) {
		return
	}
	for i := 0; i < n; {
		if c[i] < i {
			if i%2 == 0 {
				p[0], p[i] = p[i], p[0]
			} else {
				p[c[i]], p[i] = p[i], p[c[i]]
			}
			if !f(p) {
				return
			}
			c[i]++
			i = 0
		} else {
			c[i] = 0
			i++
		}
	}
}

// recorder is the rapid.TB that Verify runs rapid against: it records a
// failure instead of failing a test.
type recorder struct {
	name   string
	failed bool
	msg    strings.Builder
}

func (r *recorder) Helper()                           {}
func (r *recorder) Name() string                      { return r.name }
func (r *recorder) Logf(format string, args ...any)   {}
func (r *recorder) Log(args ...any)                   {}
func (r *recorder) Skipf(format string, args ...any)  {}
func (r *recorder) Skip(args ...any)                  {}
func (r *recorder) SkipNow()                          {}
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) FailNow()                          { r.failed = true }
func (r *recorder) Fail()                             { r.failed = true }
func (r *recorder) Failed() bool                      { return r.failed }

func (r *recorder) fail(msg string) {
	r.failed = true
	r.msg.WriteString(msg)
	r.msg.WriteByte('\n')
}
