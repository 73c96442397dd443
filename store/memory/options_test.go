package memory_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/sdk/store/memory"
)

// A negative option is refused at construction, naming the field; zero
// means the default.
func TestNegativeOptions(t *testing.T) {
	for name, opts := range map[string]*memory.Options{
		"MaxDocumentBytes": {MaxDocumentBytes: -1},
		"MaxAttempts":      {MaxAttempts: -1},
		"SweepEvery":       {SweepEvery: -1},
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "Options."+name+" may not be negative") {
					t.Errorf("New with a negative %s: panic %v, want one naming it", name, p)
				}
			}()
			memory.New(opts)
		}()
	}
	if memory.New(&memory.Options{}) == nil || memory.New(nil) == nil {
		t.Error("New with zero options returned nil")
	}
}
