package kit_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/sdk/idem/backend/kit"
)

// TestSweepRoundsAreCounted: every round of the background sweep reaches
// the sweep counters of the global meter provider (docs/observability.md),
// named by its store.
func TestSweepRoundsAreCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	s := &fakeStore{next: func(n int64) (int, error) {
		if n <= 2 {
			return 5, nil
		}
		return 0, nil
	}}
	var got rounds
	sw := kit.StartSweeping(s, (*fakeStore).Sweep, kit.SweepOptions{Store: "sqlite", Every: 10 * time.Millisecond, Limit: 5, Report: got.add})
	waitFor(t, "three rounds", func() bool { return len(got.get()) >= 3 })
	sw.Stop()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					if v, _ := p.Attributes.Value("db.system.name"); v.AsString() == "sqlite" {
						sums[m.Name] += p.Value
					}
				}
			}
		}
	}
	rounds := int64(len(got.get()))
	if sums["idemkit.sweep.deleted"] != 10 || sums["idemkit.sweep.passes"] != rounds {
		t.Errorf("counters %v, want idemkit.sweep.deleted 10 and idemkit.sweep.passes %d", sums, rounds)
	}
}
