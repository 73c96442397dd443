package memory_test

import (
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
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
		Sweeper:          true,
	})
}
