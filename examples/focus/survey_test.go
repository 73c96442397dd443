package main

import (
	"testing"

	"github.com/idemkit/sdk/internal/docscheck"
	"github.com/idemkit/sdk/store/memory"
)

// docs/survey.md says of each tool what the server lists.
func TestSurveySaysWhatIsListed(t *testing.T) {
	docscheck.Survey(t, NewServer(memory.New(nil), Config{}), "examples/focus")
}
