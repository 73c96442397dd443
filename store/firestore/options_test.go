package firestore_test

import (
	"context"
	"strings"
	"testing"

	fs "cloud.google.com/go/firestore"

	idemfs "github.com/idemkit/sdk/store/firestore"
)

// A negative option is refused at construction, naming the field; zero
// means the default. Neither NewClient nor New connects.
func TestNegativeOptions(t *testing.T) {
	t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
	c, err := fs.NewClient(context.Background(), "options-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, opts := range map[string]*idemfs.Options{
		"MaxDocumentBytes": {MaxDocumentBytes: -1},
		"MaxWrites":        {MaxWrites: -1},
		"MaxAttempts":      {MaxAttempts: -1},
	} {
		if _, err := idemfs.New(c, opts); err == nil || !strings.Contains(err.Error(), "Options."+name+" may not be negative") {
			t.Errorf("New with a negative %s: %v, want an error naming it", name, err)
		}
	}
	if _, err := idemfs.New(c, &idemfs.Options{MaxWrites: idemfs.MaxWrites + 1}); err == nil {
		t.Error("New accepted MaxWrites over the maximum")
	}
	if _, err := idemfs.New(c, &idemfs.Options{}); err != nil {
		t.Errorf("New with zero options: %v", err)
	}
}
