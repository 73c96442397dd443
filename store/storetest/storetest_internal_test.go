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
	hidden := struct{ idem.Store }{s} // neither Reader nor Sweeper
	cases := []struct {
		name string
		s    idem.Store
		h    Harness
		want []string // a word of each error, in order
	}{
		{"declared and present", s, Harness{Reader: true, Sweeper: true}, nil},
		{"none declared, none present", hidden, Harness{}, nil},
		{"declared, missing", hidden, Harness{Reader: true, Sweeper: true}, []string{"declares backend.Reader", "declares backend.Sweeper"}},
		{"present, not declared", s, Harness{Sweeper: true}, []string{"implements backend.Reader"}},
	}
	for _, c := range cases {
		errs := capabilityErrors(c.s, c.h)
		if !slices.EqualFunc(errs, c.want, strings.Contains) {
			t.Errorf("%s: %q, want errors with %q", c.name, errs, c.want)
		}
	}
}
