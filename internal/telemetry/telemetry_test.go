package telemetry

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A sweeper's passes are counted by store, failed ones with error.type,
// and the records they deleted, failed passes' included.
func TestSweepPass(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	in := newSweepInstruments(mp)
	recordSweep(ctx, in, "sqlite", 500, nil)
	recordSweep(ctx, in, "sqlite", 0, nil)
	recordSweep(ctx, in, "sqlite", 20, errors.New("disk I/O error"))
	recordSweep(ctx, in, "postgresql", 7, nil)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				key := m.Name
				for _, kv := range p.Attributes.ToSlice() {
					key += " " + string(kv.Key) + "=" + kv.Value.Emit()
				}
				got[key] = p.Value
			}
		}
	}
	want := map[string]int64{
		SweepDeleted + " db.system.name=sqlite":                  520,
		SweepDeleted + " db.system.name=postgresql":              7,
		SweepPasses + " db.system.name=sqlite":                   2,
		SweepPasses + " db.system.name=sqlite error.type=_OTHER": 1,
		SweepPasses + " db.system.name=postgresql":               1,
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	// Without a provider, the global one: no panic, nothing to see.
	SweepPass(ctx, "memory", 3, nil)
}
