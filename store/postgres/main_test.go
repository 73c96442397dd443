package postgres_test

import (
	"flag"
	"os"
	"testing"

	"github.com/idemkit/sdk/internal/testenv"
)

// TestMain skips the examples that need the test server when
// IDEMKIT_POSTGRES_URL is not set, as the tests skip (testenv.Service): an
// example cannot skip itself. In CI they run, and fail without a server.
// A -test.skip of the caller's own is left as it is.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("IDEMKIT_POSTGRES_URL") == "" && !testenv.InCI() && flag.Lookup("test.skip").Value.String() == "" {
		if err := flag.Set("test.skip", "^Example_adoptExistingSchema$"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
