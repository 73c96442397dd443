package storetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// A harness that declares a capability its store lacks, or leaves out one
// its store has, fails Capabilities: a store does not pass by skipping.
func TestCapabilityErrors(t *testing.T) {
	s := memory.New(nil)
	defer s.Close()
	hidden := struct{ idem.Store }{s} // no optional capability
	exp := expirer{hidden, "expires_at"}
	cases := []struct {
		name string
		s    idem.Store
		h    Harness
		want []string // a word of each error, in order
	}{
		{"declared and present", s, Harness{Reader: true, ReadOnlyRunner: true, Sweeper: true}, nil},
		{"none declared, none present", hidden, Harness{}, nil},
		{"declared, missing", hidden, Harness{Reader: true, ReadOnlyRunner: true, Sweeper: true}, []string{"declares backend.Reader", "declares backend.ReadOnlyRunner", "declares backend.Sweeper"}},
		{"present, not declared", s, Harness{Sweeper: true}, []string{"implements backend.Reader", "implements backend.ReadOnlyRunner"}},
		{"expirer declared", exp, Harness{Expirer: true}, nil},
		{"expirer not declared", exp, Harness{}, []string{"implements backend.Expirer"}},
		{"expirer declared, missing", s, Harness{Reader: true, ReadOnlyRunner: true, Sweeper: true, Expirer: true}, []string{"declares backend.Expirer"}},
		{"expirer without a field", expirer{hidden, ""}, Harness{Expirer: true}, []string{"names no ExpiryField"}},
		{"sweeper and expirer", sweepExpirer{s}, Harness{Reader: true, ReadOnlyRunner: true, Sweeper: true, Expirer: true}, []string{"both"}},
	}
	for _, c := range cases {
		errs := capabilityErrors(c.s, c.h)
		if !slices.EqualFunc(errs, c.want, strings.Contains) {
			t.Errorf("%s: %q, want errors with %q", c.name, errs, c.want)
		}
	}
}

type expirer struct {
	idem.Store
	field string
}

func (e expirer) ExpiryField() string { return e.field }

type sweepExpirer struct{ *memory.Store }

func (sweepExpirer) ExpiryField() string { return "expires_at" }
