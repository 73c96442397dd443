package otelidem

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
	"github.com/idemkit/sdk/store/memory"
)

// A sweeper's passes are counted by store, failed ones with error.type,
// and the records they deleted, failed passes' included.
func TestOnSweep(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	tr := NewTracer(&Options{MeterProvider: mp})
	tr.OnSweep(kit.SweepRound{Store: "sqlite", Deleted: 500})
	tr.OnSweep(kit.SweepRound{Store: "sqlite"})
	tr.OnSweep(kit.SweepRound{Store: "sqlite", Deleted: 20, Err: errors.New("disk I/O error")})
	tr.OnSweep(kit.SweepRound{Store: "postgresql", Deleted: 7})

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
		metricSweepDeleted + " db.system.name=sqlite":                  520,
		metricSweepDeleted + " db.system.name=postgresql":              7,
		metricSweepPasses + " db.system.name=sqlite":                   2,
		metricSweepPasses + " db.system.name=sqlite error.type=_OTHER": 1,
		metricSweepPasses + " db.system.name=postgresql":               1,
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
	NewTracer(nil).OnSweep(kit.SweepRound{Store: "memory", Deleted: 3})
}

// A store's background sweep reaches OnSweep given as the store's own.
func TestOnSweepFromAStore(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	tr := NewTracer(&Options{MeterProvider: mp})
	now := time.Now()
	var mu sync.Mutex
	s := memory.New(&memory.Options{
		Now:        func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		SweepEvery: 10 * time.Millisecond,
		OnSweep:    tr.OnSweep,
	})
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, idem.Key{Collection: "notes", ID: "n"}, map[string]string{"text": "a"}, backend.WithExpiry(now.Add(time.Second)))
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		deleted := int64(0)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != metricSweepDeleted {
					continue
				}
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					if v, _ := p.Attributes.Value(keyDBSystem); v.AsString() == "memory" {
						deleted += p.Value
					}
				}
			}
		}
		if deleted == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d after 10 s, want 1", metricSweepDeleted, deleted)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
