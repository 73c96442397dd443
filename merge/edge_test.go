package merge_test

import (
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/merge/mergetest"
)

// Priority breaks ties by JSON, so -0 and +0 (equal to ==, not to a store)
// join the same in both orders.
func TestPrioritySignedZero(t *testing.T) {
	rule := merge.Priority(1.0, 2.0)
	negZero := math.Copysign(0, -1)
	if got1, got2 := rule(negZero, 0), rule(0, negZero); math.Signbit(got1) != math.Signbit(got2) {
		t.Errorf("Priority(-0, 0) = %v, Priority(0, -0) = %v", got1, got2)
	}
	gen := rapid.SampledFrom([]float64{negZero, 0, 1, 2, 3})
	if err := mergetest.Verify(rule, gen); err != nil {
		t.Errorf("Priority over floats with signed zeros: %v", err)
	}
}

// A value that cannot be stored is reported under the JSON law, not as a
// broken algebraic one.
func TestNaNIsAJSONProblem(t *testing.T) {
	err := mergetest.Verify(merge.Max[float64], rapid.SampledFrom([]float64{math.NaN(), 1}))
	var le *mergetest.LawError
	if !errors.As(err, &le) || le.Law != "json" {
		t.Errorf("Verify(Max, NaN) = %v, want the json law", err)
	}
}
