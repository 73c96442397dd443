package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/sdk/store/sqlite"
)

// A negative option is refused at construction, naming the field, before
// the file is opened; zero means the default.
func TestNegativeOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.db")
	for name, opts := range map[string]*sqlite.Options{
		"MaxDocumentBytes": {MaxDocumentBytes: -1},
		"MaxAttempts":      {MaxAttempts: -1},
		"BusyTimeout":      {BusyTimeout: -1},
		"SweepEvery":       {SweepEvery: -1},
	} {
		if s, err := sqlite.Open(path, opts); err == nil || !strings.Contains(err.Error(), "Options."+name+" may not be negative") {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open with a negative %s: %v, want an error naming it", name, err)
		}
	}
	s, err := sqlite.Open(path, &sqlite.Options{})
	if err != nil {
		t.Fatalf("Open with zero options: %v", err)
	}
	s.Close()
}
