package firestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// clear deletes every document of project with the emulator's DELETE
// endpoint.
func clear(host, project string) error {
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
		if err := clear(host, project); err != nil {
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
	// The native writes go to a collection of the server's own.
	native := newClient(t).Collection("native")
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			return newStore(t, &idemfs.Options{Now: now, MaxDocumentBytes: 64 << 10})
		},
		MaxDocumentBytes: 64 << 10,
		// The emulator is slow under heavy contention on one document:
		// the cases that contend on one (16 to 64 goroutines elsewhere)
		// run 8 here; what they assert does not change. At 8 and at 10, 3
		// of 3 runs passed under -race (19 to 29 s per run of the suite on
		// 2 shared cores). Before the store stopped read-locking
		// the documents it writes (see flush in tx.go), transactions that
		// read and wrote one document waited on each other's read locks
		// until the emulator's "Transaction lock timeout" (about 2 s), and
		// at 8 a run lost 4 of 8 concurrent merges after 100 attempts each.
		Concurrency: 8,
		Reader:      true,
		Expirer:     true,
		As:          []any{new(*fs.Transaction)},
		AsWrite: func(ctx context.Context, tx idem.Tx, id string) error {
			ftx, err := nativeTx(tx)
			if err != nil {
				return err
			}
			return ftx.Create(native.Doc(id), map[string]any{"n": 1})
		},
		AsRead: func(ctx context.Context, tx idem.Tx, id string) (bool, error) {
			ftx, err := nativeTx(tx)
			if err != nil {
				return false, err
			}
			d, err := ftx.Get(native.Doc(id))
			if status.Code(err) == codes.NotFound {
				return false, nil
			}
			return d.Exists(), err
		},
	})
}

// nativeTx returns tx's Firestore transaction.
func nativeTx(tx idem.Tx) (*fs.Transaction, error) {
	var ftx *fs.Transaction
	if !tx.As(&ftx) {
		return nil, errors.New("As(**firestore.Transaction) = false")
	}
	return ftx, nil
}
