// Package storeurltest names a fresh store of every kind for a test, as a
// storeurl value: memory and SQLite always, PostgreSQL, DynamoDB Local and
// the Firestore emulator when the project's scripts started them (and in
// CI, where a missing one fails the test).
package storeurltest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/sdk/internal/testenv"
)

// Spec is one store for a test.
type Spec struct {
	Name string // memory, sqlite, postgres, dynamodb, firestore
	URL  string // a storeurl value
}

var seq atomic.Int64

// unique returns a name no other store of this test run has.
func unique() string { return fmt.Sprintf("x%d_%d", os.Getpid(), seq.Add(1)) }

// Fresh returns a store value of the kind name whose data no other call of
// Fresh shares.
func Fresh(t testing.TB, name string) string {
	t.Helper()
	switch name {
	case "memory":
		return "memory:"
	case "sqlite":
		return "sqlite:" + filepath.Join(t.TempDir(), "idem.db")
	case "postgres":
		base := testenv.Service(t, "IDEMKIT_POSTGRES_URL", "scripts/with-postgres.sh")
		u, err := url.Parse(base)
		if err != nil {
			t.Fatalf("IDEMKIT_POSTGRES_URL does not parse: %v", err)
		}
		q := u.Query()
		q.Set("table_prefix", unique()+"_")
		u.RawQuery = q.Encode()
		return u.String()
	case "dynamodb":
		ep := testenv.Service(t, "IDEMKIT_DYNAMODB_URL", "scripts/with-dynamodb.sh")
		return "dynamodb://" + strings.ReplaceAll(unique(), "_", "-") + "?endpoint=" + url.QueryEscape(ep)
	case "firestore":
		host := testenv.Service(t, "IDEMKIT_FIRESTORE_EMULATOR_HOST", "scripts/with-firestore.sh")
		return "firestore://idemkit-examples?emulator=" + url.QueryEscape(host) + "&prefix=" + unique()
	}
	t.Fatalf("no store kind %q", name)
	return ""
}

// Names are the kinds of store Fresh knows, in the order tests run them.
var Names = []string{"memory", "sqlite", "postgres", "dynamodb", "firestore"}
