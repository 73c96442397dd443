package memory_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// BenchmarkRunCreate measures a bare Run that creates one small document.
func BenchmarkRunCreate(b *testing.B) {
	s := memory.New()
	doc := map[string]string{"title": "hello"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := idem.Key{Collection: "bench", ID: strconv.Itoa(i)}
		i++
		if err := s.Run(b.Context(), func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, k, doc)
		}); err != nil {
			b.Fatal(err)
		}
	}
}
