package sqlite_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// BenchmarkRunCreate measures a bare Run that creates one small document:
// one committed, fsynced write transaction.
func BenchmarkRunCreate(b *testing.B) {
	s, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
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
