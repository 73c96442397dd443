package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/idemkit/sdk/internal/docscheck"
	"github.com/idemkit/sdk/store/memory"
)

// docs/survey.md says of each tool what the server lists.
func TestSurveySaysWhatIsListed(t *testing.T) {
	a := newApp(memory.New(nil), newPoster("http://127.0.0.1:1"), slog.New(slog.NewTextHandler(io.Discard, nil)), 0, 0)
	docscheck.Survey(t, a.server(), "examples/stories")
}
