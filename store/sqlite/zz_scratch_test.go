package sqlite_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

func BenchmarkScratch(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"), nil)
	ctx := context.Background()
	big := strings.Repeat("x", 400)
	var t1s, t2s, t3s time.Duration
	i := 0
	for b.Loop() {
		i++
		id := strconv.Itoa(i)
		t0 := time.Now()
		s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, idem.Key{Collection: "notes", ID: "a" + id}, map[string]string{"text": "hello"})
		})
		t1 := time.Now()
		s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			tx.Create(ctx, idem.Key{Collection: "notes", ID: "b" + id}, map[string]string{"text": "hello"})
			sum := sha256.Sum256([]byte(id))
			return tx.Create(ctx, idem.Key{Collection: "idem_ops", ID: hex.EncodeToString(sum[:])}, map[string]string{"text": big}, backend.WithExpiry(time.Now().Add(time.Hour)))
		})
		t2 := time.Now()
		s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			tx.Create(ctx, idem.Key{Collection: "notes", ID: "c" + id}, map[string]string{"text": "hello"})
			return tx.Create(ctx, idem.Key{Collection: "notes", ID: "d" + id}, map[string]string{"text": "hello"})
		})
		t3 := time.Now()
		t1s += t1.Sub(t0)
		t2s += t2.Sub(t1)
		t3s += t3.Sub(t2)
	}
	b.ReportMetric(float64(t2s)/float64(t1s), "two-op/bare")
	b.ReportMetric(float64(t3s)/float64(t1s), "two-notes/bare")
}
