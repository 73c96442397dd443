package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/postgres"
)

// noteTool is a wrapped handler that creates one note per call under a
// server-made id, reading the id first when getFirst is set; runs counts
// its runs, committed or not.
type noteTool struct {
	handle mcp.ToolHandler
	runs   atomic.Int64
	seq    atomic.Int64
}

func newNoteTool(s *postgres.Store, getFirst bool) *noteTool {
	nt := &noteTool{}
	_, nt.handle = idem.Tool(&mcp.Tool{Name: "add_note"}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, noteIn, error) {
			nt.runs.Add(1)
			k := idem.Key{Collection: "notes", ID: "n" + strconv.FormatInt(nt.seq.Add(1), 10)}
			if getFirst {
				var got noteIn
				if _, err := tx.Get(ctx, k, &got); err == nil {
					return nil, noteIn{}, fmt.Errorf("note %s is there already", k.ID)
				}
			}
			return nil, in, tx.Create(ctx, k, in)
		}, idem.RequireOpID())
	return nt
}

type noteIn struct {
	Text string `json:"text"`
}

// call sends a first call with op id op; it fails tb unless the handler's
// write committed.
func (nt *noteTool) call(tb testing.TB, op string) {
	res, err := nt.handle(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
		Name: "add_note", Arguments: json.RawMessage(`{"text":"` + op + `","op_id":"` + op + `"}`)}})
	if err != nil || res.IsError || res.Meta[idem.MetaReplayed] == true {
		tb.Errorf("call %s: %v %v", op, err, res)
	}
}

// sendAtOnce sends ops distinct first calls from clients goroutines at once.
func (nt *noteTool) sendAtOnce(tb testing.TB, prefix string, clients, ops int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(ops); i = next.Add(1) {
				nt.call(tb, prefix+strconv.FormatInt(i, 10))
			}
		})
	}
	wg.Wait()
}

// TestDistinctOpsCommitAtFirstAttempt: first calls with distinct op ids
// from 32 clients at once, each on a connection of its own, never conflict
// with one another: the handler runs once per call. The op record is
// created at commit without a read inside the transaction, so no
// serialization failure of SSI's page-level predicate locks can make them
// retry (a read of the op record in the transaction, as a handler's Get
// before its Create, does: docs/stores.md, "PostgreSQL").
func TestDistinctOpsCommitAtFirstAttempt(t *testing.T) {
	const clients, ops = 32, 640
	s := newStore(t, newPool(t, clients), nil)
	nt := newNoteTool(s, false)
	nt.sendAtOnce(t, "op", clients, ops)
	if n := nt.runs.Load(); n != ops {
		t.Errorf("%d distinct first calls ran the handler %d times, want once each", ops, n)
	}
}

// BenchmarkPoolSize sends distinct first calls from 32 clients at once
// through one wrapped handler on pools of 4, 8 and 32 connections, in
// rounds that alternate the variants, and counts what each call cost:
//
//   - runs/op: the handler's runs per call (above 1: serialization
//     failures retried).
//   - wait-us/op: time spent acquiring a connection from the pool, per call
//     (pgxpool's AcquireDuration: queueing for a connection, and opening
//     one).
//   - server-cpu-us/op: the CPU time of the server's processes per call,
//     where the server runs on this machine (read from /proc).
//
// "cold" opens the pool's connections inside the measurement, as the suite's
// clients=32 did before it warmed up with 32 clients; "get" is a handler
// that reads its note's key before it creates it.
//
//	scripts/with-postgres.sh go test -run '^$' -bench PoolSize -benchtime 3000x ./store/postgres
func BenchmarkPoolSize(b *testing.B) {
	const clients = 32
	variants := []struct {
		name        string
		conns       int32
		cold, getIt bool
	}{
		{"conns=4", 4, false, false},
		{"conns=8", 8, false, false},
		{"conns=32", 32, false, false},
		{"conns=32/cold", 32, true, false},
		{"conns=8/get", 8, false, true},
		{"conns=32/get", 32, false, true},
	}
	for r := range 3 {
		for _, v := range variants {
			b.Run(fmt.Sprintf("round=%d/%s", r, v.name), func(b *testing.B) {
				pool := newPool(b, v.conns)
				nt := newNoteTool(newStore(b, pool, nil), v.getIt)
				warm := clients
				if v.cold {
					warm = 1
				}
				nt.sendAtOnce(b, fmt.Sprintf("warm-%d-", r), warm, 10*warm)
				mon := newPool(b, 1)
				st0, cpu0, runs0 := pool.Stat(), serverCPU(b, mon), nt.runs.Load()
				b.ResetTimer()
				t0 := time.Now()
				nt.sendAtOnce(b, fmt.Sprintf("op-%d-", r), clients, b.N)
				el := time.Since(t0)
				b.StopTimer()
				st1, cpu1 := pool.Stat(), serverCPU(b, mon)
				n := float64(b.N)
				b.ReportMetric(n/el.Seconds(), "ops/s")
				b.ReportMetric(float64(nt.runs.Load()-runs0)/n, "runs/op")
				b.ReportMetric(float64((st1.AcquireDuration()-st0.AcquireDuration()).Microseconds())/n, "wait-us/op")
				if cpu0 >= 0 && cpu1 >= 0 {
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/n, "server-cpu-us/op")
				}
			})
		}
	}
}

// serverCPU returns the CPU time the test server's processes have used
// (the postmaster's children, live or reaped), or -1 if the server is not
// a process of this machine that /proc shows.
func serverCPU(tb testing.TB, mon *pgxpool.Pool) time.Duration {
	var pid int
	if err := mon.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		tb.Fatal(err)
	}
	backend, ok := procStat(pid)
	if !ok {
		return -1
	}
	postmaster := backend[1]
	pm, ok := procStat(int(postmaster))
	if !ok {
		return -1
	}
	ticks := pm[13] + pm[14] // children already reaped: cutime, cstime
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(p); ok && st[1] == postmaster {
			ticks += st[11] + st[12] // utime, stime
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// procStat returns the numeric fields of /proc/pid/stat after the command
// name, from the state on (index 0; 1 is the parent's pid).
func procStat(pid int) ([]int64, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return nil, false
	}
	v := make([]int64, len(f))
	for i := 1; i < len(f); i++ {
		v[i], _ = strconv.ParseInt(f[i], 10, 64)
	}
	return v, true
}
