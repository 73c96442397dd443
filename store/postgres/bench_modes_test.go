package postgres_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkOpRecordModes is BenchmarkOpRecord in each query mode the store
// supports behind a transaction-pooling PgBouncer, both directly and
// through PgBouncer (IDEMKIT_PGBOUNCER_URL), with pgx's default mode
// directly as the reference. Every iteration runs every variant's bare
// transaction, first call and replay in turn, so that drift hits them
// alike. Metrics are per variant, in µs: <where>-<mode>-{bare,first,replay}-us,
// and the first/bare and replay/first ratios.
func BenchmarkOpRecordModes(b *testing.B) {
	serverURL(b)
	type variant struct {
		name    string
		bench   *depositBench
		wrapped func(id string) bool

		bare, first, replay time.Duration
	}
	var vs []*variant
	add := func(where, url string, mode pgx.QueryExecMode) {
		d := newDepositBenchOn(b, poolAt(b, url, 2, mode, nil, nil))
		vs = append(vs, &variant{name: where + "-" + strings.ReplaceAll(mode.String(), " ", "_"), bench: d, wrapped: d.wrapped()})
	}
	add("direct", serverURL(b), pgx.QueryExecModeCacheStatement)
	for _, mode := range pooledModes {
		add("direct", serverURL(b), mode)
		add("pgbouncer", pooledURL(b), mode)
	}
	for _, v := range vs {
		for i := range 20 {
			id := strconv.Itoa(i)
			v.bench.bare("warm-bare-" + id)
			v.wrapped("warm-op-" + id)
			v.wrapped("warm-op-" + id)
		}
	}
	n := 0
	for b.Loop() {
		id := strconv.Itoa(n)
		n++
		for _, v := range vs {
			t0 := time.Now()
			v.bench.bare("bare-" + id)
			t1 := time.Now()
			if v.wrapped("op-" + id) {
				b.Fatalf("%s: first call replayed", v.name)
			}
			t2 := time.Now()
			if !v.wrapped("op-" + id) {
				b.Fatalf("%s: repeat not replayed", v.name)
			}
			t3 := time.Now()
			v.bare += t1.Sub(t0)
			v.first += t2.Sub(t1)
			v.replay += t3.Sub(t2)
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) / 1e3 }
	for _, v := range vs {
		b.ReportMetric(us(v.bare), v.name+"-bare-us")
		b.ReportMetric(us(v.first), v.name+"-first-us")
		b.ReportMetric(us(v.replay), v.name+"-replay-us")
		b.ReportMetric(float64(v.first)/float64(v.bare), v.name+"-first/bare")
		b.ReportMetric(float64(v.replay)/float64(v.first), v.name+"-replay/first")
	}
}
