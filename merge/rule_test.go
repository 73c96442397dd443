package merge_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/merge/mergetest"
)

var base = time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)

// timeGen draws instants from a few minutes, in UTC or a fixed +02:00 zone,
// so equal instants with different text are common.
func timeGen() *rapid.Generator[time.Time] {
	zone := time.FixedZone("", 2*3600)
	return rapid.Custom(func(t *rapid.T) time.Time {
		at := base.Add(time.Duration(rapid.IntRange(0, 4).Draw(t, "min")) * time.Minute)
		if rapid.Bool().Draw(t, "zoned") {
			at = at.In(zone)
		}
		return at
	})
}

func TestBuiltinsPassCheck(t *testing.T) {
	type rec struct {
		At    time.Time      `json:"at"`
		N     int            `json:"n"`
		Tags  map[string]int `json:"tags"`
		Maybe *float64       `json:"maybe"`
	}
	small := rapid.IntRange(-3, 3)
	t.Run("Earliest", func(t *testing.T) { mergetest.Check(t, merge.Earliest, timeGen()) })
	t.Run("Latest", func(t *testing.T) { mergetest.Check(t, merge.Latest, timeGen()) })
	t.Run("MinInt", func(t *testing.T) { mergetest.Check(t, merge.Min[int], small) })
	t.Run("MaxInt", func(t *testing.T) { mergetest.Check(t, merge.Max[int], small) })
	floats := rapid.SampledFrom([]float64{math.Copysign(0, -1), 0, 1.5, -2})
	t.Run("MinFloatSignedZero", func(t *testing.T) { mergetest.Check(t, merge.Min[float64], floats) })
	t.Run("MaxFloatSignedZero", func(t *testing.T) { mergetest.Check(t, merge.Max[float64], floats) })
	t.Run("MaxString", func(t *testing.T) {
		mergetest.Check(t, merge.Max[string], rapid.SampledFrom([]string{"", "a", "b", "ab"}))
	})
	t.Run("Priority", func(t *testing.T) {
		mergetest.Check(t, merge.Priority("done", "abandoned"),
			rapid.SampledFrom([]string{"done", "abandoned", "interrupted", "x", ""}))
	})
	t.Run("Lowest", func(t *testing.T) {
		mergetest.Check(t, merge.Lowest[rec](), rapid.Custom(func(t *rapid.T) rec {
			return rec{At: timeGen().Draw(t, "at"), N: small.Draw(t, "n")}
		}))
	})
	t.Run("Union", func(t *testing.T) {
		gen := rapid.OneOf(
			rapid.Just[map[string]int](nil),
			rapid.MapOfN(rapid.SampledFrom([]string{"a", "b", "c"}), small, 0, 3),
		)
		mergetest.Check(t, merge.Union[string](merge.Max[int]), gen)
	})
	t.Run("Optional", func(t *testing.T) {
		mergetest.Check(t, merge.Optional(merge.Earliest), rapid.Ptr(timeGen(), true))
	})
	t.Run("Struct", func(t *testing.T) {
		rule := merge.Struct(
			merge.Field(func(r *rec) *time.Time { return &r.At }, merge.Latest),
			merge.Field(func(r *rec) *int { return &r.N }, merge.Min[int]),
			merge.Field(func(r *rec) *map[string]int { return &r.Tags }, merge.Union[string](merge.Min[int])),
			merge.Field(func(r *rec) **float64 { return &r.Maybe }, merge.Optional(merge.Max[float64])),
		)
		mergetest.Check(t, rule, rapid.Custom(func(t *rapid.T) rec {
			return rec{
				At:    timeGen().Draw(t, "at"),
				N:     small.Draw(t, "n"),
				Tags:  rapid.MapOfN(rapid.SampledFrom([]string{"a", "b"}), small, 1, 2).Draw(t, "tags"),
				Maybe: rapid.Ptr(floats, true).Draw(t, "maybe"),
			}
		}))
	})
}

func TestBuiltinsChooseTheRightValue(t *testing.T) {
	early, late := base, base.Add(15*time.Minute)
	if got := merge.Earliest(late, early); !got.Equal(early) {
		t.Errorf("Earliest = %v, want %v", got, early)
	}
	if got := merge.Latest(early, late); !got.Equal(late) {
		t.Errorf("Latest = %v, want %v", got, late)
	}
	if got := merge.Min(3, -1); got != -1 {
		t.Errorf("Min = %d", got)
	}
	if got := merge.Max(3, -1); got != 3 {
		t.Errorf("Max = %d", got)
	}
	outcome := merge.Priority("done", "abandoned")
	for _, c := range []struct{ a, b, want string }{
		{"abandoned", "done", "done"},
		{"done", "interrupted", "done"},
		{"interrupted", "abandoned", "abandoned"},
		{"zz", "aa", "aa"}, // both unlisted: deterministic pick
	} {
		if got := outcome(c.a, c.b); got != c.want {
			t.Errorf("Priority(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	u := merge.Union[string](merge.Max[int])
	a := map[string]int{"x": 1, "y": 5}
	got := u(a, map[string]int{"y": 7, "z": 2})
	if len(got) != 3 || got["x"] != 1 || got["y"] != 7 || got["z"] != 2 {
		t.Errorf("Union = %v", got)
	}
	if a["y"] != 5 || len(a) != 2 {
		t.Errorf("Union modified its argument: %v", a)
	}
	opt := merge.Optional(merge.Earliest)
	if got := opt(nil, &late); got == nil || !got.Equal(late) {
		t.Errorf("Optional(nil, late) = %v", got)
	}
	if got := opt(&late, &early); got == nil || !got.Equal(early) {
		t.Errorf("Optional(late, early) = %v", got)
	}
	if got := opt(nil, nil); got != nil {
		t.Errorf("Optional(nil, nil) = %v", got)
	}
}

// TestStructForgottenField: a field without a rule is zero in the result, so
// Check reports the forgotten field as a broken law (idempotence) instead of
// letting one side's value through.
func TestStructForgottenField(t *testing.T) {
	type rec struct {
		N  int       `json:"n"`
		At time.Time `json:"at"`
	}
	rule := merge.Struct(merge.Field(func(r *rec) *int { return &r.N }, merge.Max[int]))
	got := rule(rec{N: 1, At: base}, rec{N: 2, At: base})
	if got.N != 2 || !got.At.IsZero() {
		t.Errorf("Struct = %+v, want N 2 and a zero At", got)
	}
	err := mergetest.Verify(rule, rapid.Custom(func(t *rapid.T) rec {
		return rec{N: rapid.IntRange(0, 3).Draw(t, "n"), At: timeGen().Draw(t, "at")}
	}))
	var le *mergetest.LawError
	if !errors.As(err, &le) || le.Law != "idempotent" {
		t.Errorf("Verify = %v, want idempotence broken", err)
	}
}
