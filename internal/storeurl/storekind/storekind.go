// Package storekind opens a store value (the grammar of package storeurl)
// with the kinds of store linked into the program: memory and SQLite
// always, and PostgreSQL, DynamoDB or Firestore once the program imports
// the package that registers it (postgresurl, dynamourl, firestoreurl,
// beside this one). Each of those brings its client library: pgx, the AWS
// SDK, Google's Firestore client and gRPC. Package storeurl imports all
// three; the example servers import them only under a build tag
// (examples/internal/exserve), so that their default build downloads and
// compiles the embedded stores alone.
package storekind

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/sqlite"
)

// Options change how [Open] opens a store.
type Options struct {
	// NoSweep turns off the background sweep of expired op records on the
	// stores that have one (memory, SQLite, PostgreSQL; docs/stores.md), for
	// a deployment where one separate process sweeps.
	NoSweep bool
	// SweepEvery is the longest wait between two rounds of that sweep
	// (the stores' Options.SweepEvery); 0 is the store's default, a
	// minute.
	SweepEvery time.Duration
}

// An Opener opens the store a value of its kind names and returns it with
// a function that releases what it holds. Its errors name the kind of
// store, never the value (a URL may carry credentials).
type Opener func(ctx context.Context, spec string, o Options) (idem.Store, func(), error)

// A Kind is a kind of store a value can name.
type Kind struct {
	Schemes []string // what its values begin with, before the first colon
	Usage   string   // its values' grammar, for a flag's help text
	Open    Opener
}

var (
	mu    sync.RWMutex
	kinds = []Kind{
		{Schemes: []string{"memory"}, Usage: "memory:", Open: openMemory},
		{Schemes: []string{"sqlite"}, Usage: "sqlite:PATH", Open: openSQLite},
	}
)

// Register makes [Open] open values of k's schemes with k.Open. It is
// called from the init function of the package that links the kind; each
// scheme has one such package.
func Register(k Kind) {
	mu.Lock()
	defer mu.Unlock()
	kinds = append(kinds, k)
}

// Linked reports whether values that begin with scheme open in this
// program.
func Linked(scheme string) bool {
	return opener(scheme) != nil
}

// opener returns the opener of scheme's kind, or nil when no kind has it.
func opener(scheme string) Opener {
	mu.RLock()
	defer mu.RUnlock()
	for _, k := range kinds {
		if slices.Contains(k.Schemes, scheme) {
			return k.Open
		}
	}
	return nil
}

// Usage is the grammar of the values that open in this program, for a
// flag's help text.
func Usage() string {
	mu.RLock()
	defer mu.RUnlock()
	u := make([]string, len(kinds))
	for i, k := range kinds {
		u[i] = k.Usage
	}
	return strings.Join(u, " | ")
}

// Open opens the store spec names with the opener of its kind. Errors name
// the kind of store, never the value.
func Open(ctx context.Context, spec string, o Options) (idem.Store, func(), error) {
	scheme, _, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, nil, fmt.Errorf("a store value begins with its kind: want one of %s", Usage())
	}
	open := opener(scheme)
	if open == nil {
		return nil, nil, fmt.Errorf("store kind %q: want one of %s", scheme, Usage())
	}
	return open(ctx, spec, o)
}

func openMemory(_ context.Context, _ string, o Options) (idem.Store, func(), error) {
	s := memory.New(&memory.Options{NoSweep: o.NoSweep, SweepEvery: o.SweepEvery})
	return s, func() { s.Close() }, nil
}

func openSQLite(_ context.Context, spec string, o Options) (idem.Store, func(), error) {
	path := strings.TrimPrefix(spec, "sqlite:")
	if path == "" {
		return nil, nil, errors.New("store sqlite: want sqlite:PATH")
	}
	s, err := sqlite.Open(path, &sqlite.Options{NoSweep: o.NoSweep, SweepEvery: o.SweepEvery})
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return s, func() { s.Close() }, nil
}
