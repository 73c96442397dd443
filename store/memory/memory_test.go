package memory_test

import (
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend/kit"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			// The suite's sweep cases count what their own Sweep calls
			// delete: no background sweep.
			return memory.New(&memory.Options{Now: now, NoSweep: true})
		},
		MaxDocumentBytes: 1 << 20,
		Reader:           true,
		ReadOnlyRunner:   true,
		Sweeper:          true,
	})
}

func TestBackgroundSweep(t *testing.T) {
	storetest.BackgroundSweep(t, func(t *testing.T, now func() time.Time, o kit.SweepOptions) (idem.Store, func() error) {
		s := memory.New(&memory.Options{Now: now, NoSweep: o.Off, SweepEvery: o.Every, OnSweep: o.Report})
		return s, s.Close
	})
}
