package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/postgres"
)

// BenchmarkRunCreate measures a bare Run that creates one small document.
func BenchmarkRunCreate(b *testing.B) {
	pool := newPool(b, 2)
	s := newStore(b, pool, nil)
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

// depositBench is the shared setup of the op-record benchmarks: one server,
// a handler's write (one INSERT into its own table) as a bare pgx
// transaction, and the same write wrapped by idem.Tool with an op id and sent
// through the postgres.Querier. The wrapped handler is called directly,
// without a transport, so the figures are the middleware's and the store's
// own cost: the input check, the transaction and the op record.
type depositBench struct {
	b      *testing.B
	pool   *pgxpool.Pool
	bare   func(id string)
	insert string
	store  *postgres.Store
}

func newDepositBench(b *testing.B) *depositBench {
	return newDepositBenchOn(b, newPool(b, 2))
}

// newDepositBenchOn is newDepositBench on pool.
func newDepositBenchOn(b *testing.B, pool *pgxpool.Pool) *depositBench {
	bk := newBank(b, pool, nil)
	d := &depositBench{b: b, pool: pool, store: bk.store,
		insert: fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING", bk.transfers)}
	d.bare = func(id string) {
		ctx := context.Background()
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, d.insert, id, "alice", 1); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// wrapped returns a fresh wrapped handler (a process of its own) as a
// function that calls it with op id id and reports whether it replayed.
func (d *depositBench) wrapped() func(id string) bool {
	_, handle := idem.Tool(&mcp.Tool{Name: "deposit"}, d.store, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in depositIn) (*mcp.CallToolResult, depositOut, error) {
		var q postgres.Querier
		if !tx.As(&q) {
			return nil, depositOut{}, errors.New("not a PostgreSQL store")
		}
		if _, err := q.Exec(ctx, d.insert, in.OpID, in.Account, in.Amount); err != nil {
			return nil, depositOut{}, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, depositOut{Balance: 1}, nil
	}, idem.OpID())
	return func(id string) bool {
		args := json.RawMessage(`{"account":"alice","amount":1,"op_id":"` + id + `"}`)
		res, err := handle(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "deposit", Arguments: args}})
		if err != nil || res.IsError {
			d.b.Fatalf("wrapped call: %v %v", err, res)
		}
		return replayed(res)
	}
}

// BenchmarkOpRecord compares, against one server in one run, the handler's
// write in a bare pgx transaction with the same write wrapped, on a first
// call and on a replay through the same wrapped handler (a client's retry on
// its session). The three are interleaved in every iteration so that drift
// hits them alike, and the benchmark reports each one's time and the two
// ratios the issue sets targets for: first/bare (at most 1.2) and
// replay/first (at most 0.5).
func BenchmarkOpRecord(b *testing.B) {
	d := newDepositBench(b)
	wrapped := d.wrapped()
	// Warm the connections' statement caches.
	for i := range 20 {
		d.bare("warm-bare-" + strconv.Itoa(i))
		wrapped("warm-op-" + strconv.Itoa(i))
		wrapped("warm-op-" + strconv.Itoa(i))
	}
	// The floor of a replay: one pooled SELECT of the op record's row,
	// as a handler would send it.
	sel := "SELECT version, doc FROM " + d.store.Table() + " WHERE collection = $1 AND id = $2"
	var tBare, tFirst, tReplay, tSelect time.Duration
	n := 0
	for b.Loop() {
		id := strconv.Itoa(n)
		n++
		t0 := time.Now()
		d.bare("bare-" + id)
		t1 := time.Now()
		if wrapped("op-" + id) {
			b.Fatal("first call replayed")
		}
		t2 := time.Now()
		if !wrapped("op-" + id) {
			b.Fatal("repeat not replayed")
		}
		t3 := time.Now()
		var v int64
		var doc []byte
		if err := d.pool.QueryRow(context.Background(), sel, "idem_ops", "op-"+id).Scan(&v, &doc); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			b.Fatal(err)
		}
		t4 := time.Now()
		tBare += t1.Sub(t0)
		tFirst += t2.Sub(t1)
		tReplay += t3.Sub(t2)
		tSelect += t4.Sub(t3)
	}
	b.ReportMetric(float64(tSelect.Nanoseconds())/float64(n), "select-ns/op")
	b.ReportMetric(float64(tReplay)/float64(tSelect), "replay/select")
	b.ReportMetric(float64(tBare.Nanoseconds())/float64(n), "bare-ns/op")
	b.ReportMetric(float64(tFirst.Nanoseconds())/float64(n), "first-ns/op")
	b.ReportMetric(float64(tReplay.Nanoseconds())/float64(n), "replay-ns/op")
	b.ReportMetric(float64(tFirst)/float64(tBare), "first/bare")
	b.ReportMetric(float64(tReplay)/float64(tFirst), "replay/first")
}

// BenchmarkOpRecordRepeatElsewhere measures the price of the default that a
// first call does not read its op record first: a repeat that reaches
// another process (a wrapped handler that never answered the op) runs the
// handler in a transaction that the op record's create at commit rolls
// back, and replays on the retry. Reported against a first call in the same
// run; there is no target for it.
func BenchmarkOpRecordRepeatElsewhere(b *testing.B) {
	d := newDepositBench(b)
	here, elsewhere := d.wrapped(), d.wrapped()
	for i := range 20 {
		here("warm-op-" + strconv.Itoa(i))
		elsewhere("warm-op-" + strconv.Itoa(i))
	}
	var tFirst, tElsewhere time.Duration
	n := 0
	for b.Loop() {
		id := "op-" + strconv.Itoa(n)
		n++
		t0 := time.Now()
		if here(id) {
			b.Fatal("first call replayed")
		}
		t1 := time.Now()
		if !elsewhere(id) {
			b.Fatal("repeat elsewhere not replayed")
		}
		t2 := time.Now()
		tFirst += t1.Sub(t0)
		tElsewhere += t2.Sub(t1)
	}
	b.ReportMetric(float64(tFirst.Nanoseconds())/float64(n), "first-ns/op")
	b.ReportMetric(float64(tElsewhere.Nanoseconds())/float64(n), "elsewhere-ns/op")
	b.ReportMetric(float64(tElsewhere)/float64(tFirst), "elsewhere/first")
}
