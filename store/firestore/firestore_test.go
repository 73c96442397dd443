package firestore_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fs "cloud.google.com/go/firestore"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/testenv"
	idemfs "github.com/idemkit/sdk/store/firestore"
	"github.com/idemkit/sdk/store/storetest"
)

// emulatorHost returns the emulator's host:port from
// IDEMKIT_FIRESTORE_EMULATOR_HOST (scripts/with-firestore.sh sets it).
// Without one the test is skipped, except in CI, where a missing emulator
// fails the run.
func emulatorHost(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, "IDEMKIT_FIRESTORE_EMULATOR_HOST", "scripts/with-firestore.sh")
}

// project is this test process's project on the emulator: its own, so that
// clearing it at the end leaves other runs' data alone.
var project = fmt.Sprintf("idemkit-test-%d", os.Getpid())

var (
	clientOnce sync.Once
	client     *fs.Client
	clientErr  error
)

// newClient returns the process's client on the emulator.
func newClient(t testing.TB) *fs.Client {
	t.Helper()
	host := emulatorHost(t)
	clientOnce.Do(func() {
		os.Setenv("FIRESTORE_EMULATOR_HOST", host)
		client, clientErr = fs.NewClient(context.Background(), project)
	})
	if clientErr != nil {
		t.Fatalf("NewClient: %v", clientErr)
	}
	return client
}

// clear deletes every document of the project with the emulator's DELETE
// endpoint.
func clear(host string) error {
	req, err := http.NewRequest(http.MethodDelete, "http://"+host+"/emulator/v1/projects/"+project+"/databases/(default)/documents", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("DELETE documents: %s", res.Status)
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if host := os.Getenv("IDEMKIT_FIRESTORE_EMULATOR_HOST"); host != "" {
		if err := clear(host); err != nil {
			fmt.Fprintln(os.Stderr, "clearing the emulator:", err)
		}
	}
	os.Exit(code)
}

var stores atomic.Int64

// newStore returns a store on collections of its own: subtests run in
// parallel on one emulator, so each store gets its own owner root and
// prefix rather than clearing the database under the others.
func newStore(t testing.TB, opts *idemfs.Options) *idemfs.Store {
	t.Helper()
	return newStoreOn(t, newClient(t), opts)
}

// newStoreOn is newStore on client c.
func newStoreOn(t testing.TB, c *fs.Client, opts *idemfs.Options) *idemfs.Store {
	t.Helper()
	o := idemfs.Options{}
	if opts != nil {
		o = *opts
	}
	n := stores.Add(1)
	o.CollectionPrefix = fmt.Sprintf("t%d_", n)
	o.OwnerCollection = fmt.Sprintf("t%d_users", n)
	s, err := idemfs.New(c, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	emulatorHost(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			// The emulator answers contention with "Transaction lock
			// timeout" aborts, which Run retries: a bound above the
			// default keeps a slow, shared machine from exhausting it.
			return newStore(t, &idemfs.Options{Now: now, MaxDocumentBytes: 64 << 10, MaxAttempts: 100})
		},
		MaxDocumentBytes: 64 << 10,
		// The emulator locks what a transaction reads and answers
		// contention with "Transaction lock timeout" aborts: 16 to 64
		// transactions on one document take minutes, and at 8 a full run
		// under -race beside the other stores' tests lost 4 of 8 merges
		// to 100 aborts each (262 s). 4 still makes every contention case
		// race, and passes; what the cases assert does not change.
		Concurrency: 4,
	})
}
