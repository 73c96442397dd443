package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/crashtest"
	"github.com/idemkit/sdk/internal/storeurl/storeurltest"
	"github.com/idemkit/sdk/internal/testenv"
)

// The shape of one run: clients making ops each, one op in changeEvery sent
// again with other arguments. The first server of a run kills itself at one
// of the points (cycled over runs, see pointOrder) on a call among the first half; the test
// kills the second at a random moment, within randomKillWithin of its start,
// while a call is in flight; a third finishes the run.
const (
	clients          = 3
	opsPerClient     = 4
	changeEvery      = 2
	randomKillWithin = 60 * time.Millisecond
)

// pointOrder is the order runs take the kill points in (run r takes
// r mod 3): the point where a retry finds the op committed comes first, so
// that a short test still covers it.
var pointOrder = []string{crashtest.PointCommitted, crashtest.PointWritten, crashtest.PointStart}

// defaultRuns is how many runs each store gets in an ordinary go test;
// IDEMKIT_CRASH_RUNS asks for another count on every store (200 for a
// longer run; docs/production.md). Firestore's 6 go at once (defaultParallel):
// should a run be held on a dead transaction's locks (below), the test
// waits for that one run, about 60 s, and no longer.
var defaultRuns = map[string]int{"sqlite": 10, "postgres": 10, "dynamodb": 10, "firestore": 6}

// defaultParallel is how many runs go at once on a store; 1 when not
// named. A server killed between a locking read of its transaction and the
// commit leaves those documents locked on the Firestore emulator until it
// ends the idle transaction, 60 s later, and the run's next call on them
// waits that long: idle time, which other runs can use. Each run has its
// own server processes, listening socket, logs and Firestore project
// (runSpec), so a run held on its locks holds up no other.
// IDEMKIT_CRASH_PARALLEL asks for another count on every store.
var defaultParallel = map[string]int{"firestore": 6}

func runCount(t *testing.T, store string) int {
	return testenv.Count(t, "IDEMKIT_CRASH_RUNS", defaultRuns[store])
}

func parallelCount(t *testing.T, store string) int {
	return testenv.Count(t, "IDEMKIT_CRASH_PARALLEL", max(1, defaultParallel[store]))
}

// runSpec returns the store value run r uses: spec itself, except on
// Firestore, where every run gets a project of its own (the emulator keeps
// projects apart: their own documents, transactions and locks).
func runSpec(spec string, r int) (string, error) {
	if !strings.HasPrefix(spec, "firestore:") {
		return spec, nil
	}
	u, err := url.Parse(spec)
	if err != nil {
		return "", errors.New("the Firestore store value does not parse")
	}
	prefix := strings.ToLower(strings.ReplaceAll(u.Query().Get("prefix"), "_", "-"))
	u.Host = fmt.Sprintf("crash-%s-r%d", strings.Trim(prefix, "-"), r)
	return u.String(), nil
}

// summary adds up the runs on one store.
type summary struct {
	store      string
	runs       int
	kills      map[string]int // by point, and "random"
	ops        int64
	calls      int64
	retries    int64
	replayed   int64
	unknown    int64
	busy       int64
	contended  int64
	changed    int64
	keyReused  int64
	accepted   int64 // changed retries that were not refused
	entries    int64
	duplicates int
	lost       int
	wrong      int
	problems   []string
	elapsed    time.Duration
	slowest    time.Duration // the longest a call took, retries included
	held       int           // runs with a call that took longer than heldAfter
}

// heldAfter is how long a call takes, retries included, before its run
// counts as held (on Firestore, on a dead transaction's locks): the
// client's timeout of one attempt.
const heldAfter = callTimeout

// add adds the figures of o, one run or more, to s.
func (s *summary) add(o *summary) {
	s.runs += o.runs
	for k, n := range o.kills {
		s.kills[k] += n
	}
	s.ops += o.ops
	s.calls += o.calls
	s.retries += o.retries
	s.replayed += o.replayed
	s.unknown += o.unknown
	s.busy += o.busy
	s.contended += o.contended
	s.changed += o.changed
	s.keyReused += o.keyReused
	s.accepted += o.accepted
	s.entries += o.entries
	s.duplicates += o.duplicates
	s.lost += o.lost
	s.wrong += o.wrong
	for _, p := range o.problems {
		if len(s.problems) < 20 {
			s.problems = append(s.problems, p)
		}
	}
	s.slowest = max(s.slowest, o.slowest)
	s.held += o.held
}

// killKinds are the ways a server was killed: at a point, or by the test.
var killKinds = append(append([]string{}, crashtest.Points...), "random")

func (s *summary) killCount() int {
	n := 0
	for _, k := range killKinds {
		n += s.kills[k]
	}
	return n
}

func (s *summary) String() string {
	var kills []string
	for _, k := range killKinds {
		kills = append(kills, fmt.Sprintf("%s %d", k, s.kills[k]))
	}
	total := s.killCount()
	return fmt.Sprintf("crash %s: %d runs in %v; %d SIGKILLs (%s); %d ops, %d calls, %d retries (%d unknown_outcome, %d busy, %d contended), %d answered from the op record; "+
		"slowest call %v, %d runs with a call over %v; %d entries; duplicates %d, lost %d, wrong answers %d; changed retries %d, key_reused %d, accepted %d",
		s.store, s.runs, s.elapsed.Round(time.Millisecond), total, strings.Join(kills, ", "), s.ops, s.calls, s.retries, s.unknown, s.busy, s.contended, s.replayed,
		s.slowest.Round(time.Millisecond), s.held, heldAfter, s.entries, s.duplicates, s.lost, s.wrong, s.changed, s.keyReused, s.accepted)
}

// crashRuns makes runs runs on the store spec names, parallel at a time.
// Run r draws its kill plan from the seed and r alone, so that
// IDEMKIT_CRASH_SEED gives every run the plan it had, whatever order the
// runs end in. Every 10 runs of a longer test it logs the summary so far.
func crashRuns(t *testing.T, name, spec string, runs, parallel int, unsafe bool) *summary {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("IDEMKIT_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("IDEMKIT_CRASH_SEED=%d; %d runs, %d at a time", seed, runs, parallel)
	sum := &summary{store: name, kills: map[string]int{}}
	var (
		mu     sync.Mutex // guards sum
		failed atomic.Bool
		wg     sync.WaitGroup
	)
	next := make(chan int)
	start := time.Now()
	for range min(parallel, runs) {
		wg.Go(func() {
			for r := range next {
				one, ok := oneRun(t, rand.New(rand.NewPCG(seed, uint64(r))), spec, r, unsafe)
				if !ok {
					failed.Store(true)
					continue
				}
				mu.Lock()
				sum.add(one)
				if sum.runs%10 == 0 && sum.runs < runs {
					sum.elapsed = time.Since(start)
					t.Logf("so far: %v", sum)
				}
				mu.Unlock()
			}
		})
	}
	for r := range runs {
		if failed.Load() {
			break // a run could not be completed: the test has failed
		}
		next <- r
	}
	close(next)
	wg.Wait()
	sum.elapsed = time.Since(start)
	return sum
}

// oneRun makes run r on the store spec names (runSpec(spec, r)) and returns
// its figures; it reports false when the run could not be completed (the
// test has failed).
func oneRun(t *testing.T, rng *rand.Rand, spec string, r int, unsafe bool) (*summary, bool) {
	spec, err := runSpec(spec, r)
	if err != nil {
		t.Errorf("run %d: %v", r, err)
		return nil, false
	}
	// ctx ends the clients' calls when the run cannot be completed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Errorf("run %d: %v", r, err)
		return nil, false
	}
	defer ln.Close()
	lnFile, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Errorf("run %d: %v", r, err)
		return nil, false
	}
	defer lnFile.Close()
	url := "http://" + ln.Addr().String() + "/mcp"

	// The ops, minted before any call.
	all := make([][]*op, clients)
	var flat []*op
	for c := range all {
		for i := range opsPerClient {
			o := &op{log: fmt.Sprintf("r%d-c%d", r, c), id: fmt.Sprintf("r%d-c%d-op%d", r, c, i), note: fmt.Sprintf("entry %d of client %d", i, c)}
			all[c] = append(all[c], o)
			flat = append(flat, o)
		}
	}
	total := clients * opsPerClient
	plan := crashtest.KillPlan{Point: pointOrder[r%len(pointOrder)], Call: 1 + rng.Int64N(int64(total/2))}
	randomDelay := time.Duration(rng.Int64N(int64(randomKillWithin)))

	args := []string{"-store", spec}
	if unsafe {
		args = append(args, "-unsafe")
	}

	// The clients start at once: their calls wait in the socket's backlog
	// until a server accepts them.
	c := &counts{}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	done := make(chan struct{})
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			cl := &client{url: url, http: hc, c: c}
			errs[i] = cl.runOps(ctx, all[i], func(j int) bool { return j%changeEvery == 1 })
		})
	}
	go func() { wg.Wait(); close(done) }()

	sum := &summary{kills: map[string]int{}}
	for phase := 0; ; phase++ {
		pargs := args
		if phase == 0 {
			pargs = append(pargs, "-kill", plan.String())
		}
		p, err := startServer(t, lnFile, pargs...)
		if err != nil {
			t.Errorf("run %d: starting the server: %v", r, err)
			cancel()
			<-done
			return nil, false
		}
		var testKilled sync.WaitGroup
		killedByTest := false
		if phase == 1 {
			testKilled.Go(func() {
				select {
				case <-p.ready:
				case <-p.exited:
					return
				}
				time.Sleep(randomDelay)
				for c.inflight.Load() == 0 { // kill while a call is in flight
					select {
					case <-done:
						return
					case <-p.exited:
						return
					case <-time.After(time.Millisecond):
					}
				}
				killedByTest = p.cmd.Process.Kill() == nil
			})
		}
		select {
		case <-p.exited:
			testKilled.Wait()
			switch {
			case p.killedAt != "" && p.killedBySIGKILL():
				sum.kills[p.killedAt]++
			case killedByTest && p.killedBySIGKILL():
				sum.kills["random"]++
			default:
				t.Errorf("run %d: the server exited on its own (%v): %s", r, p.waitErr, strings.Join(p.tail, " | "))
				p.cmd.Process.Kill()
				cancel()
				<-done
				return nil, false
			}
			continue
		case <-done:
		}
		testKilled.Wait()
		if killedByTest {
			<-p.exited
			sum.kills["random"]++
		} else if err := p.stop(); err != nil {
			t.Errorf("run %d: stopping the server: %v", r, err)
		}
		break
	}
	for _, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", r, err)
		}
	}

	f, err := verify(ctx, spec, flat, !unsafe)
	if err != nil {
		t.Errorf("run %d: reading the store: %v", r, err)
		return nil, false
	}
	sum.runs = 1
	sum.ops += int64(len(flat))
	sum.calls += c.calls.Load()
	sum.retries += c.retries.Load()
	sum.replayed += c.replayed.Load()
	sum.unknown += c.unknown.Load()
	sum.busy += c.busy.Load()
	sum.contended += c.contended.Load()
	sum.changed += c.changed.Load()
	sum.keyReused += c.keyReused.Load()
	sum.accepted += c.changedAccepted.Load()
	sum.slowest = time.Duration(c.slowest.Load())
	if sum.slowest > heldAfter {
		sum.held = 1
		t.Logf("run %d: a call took %v (the first server's kill: %s)", r, sum.slowest.Round(time.Millisecond), plan.Point)
	}
	sum.entries += f.entries
	sum.duplicates += f.duplicates
	sum.lost += f.lost
	sum.wrong += f.wrong
	for _, p := range f.problems {
		sum.problems = append(sum.problems, fmt.Sprintf("run %d: %s", r, p))
	}
	return sum, true
}

// stores are the stores the crash test runs on: the memory store keeps
// nothing across a restart.
var stores = []string{"sqlite", "postgres", "dynamodb", "firestore"}

// TestCrash kills the server at each point and at random moments on every
// store, and finds every op committed once: no duplicate, no lost op, every
// answer naming the op's own entry, and every changed retry refused with
// key_reused.
func TestCrash(t *testing.T) {
	t.Parallel()
	serverBinary(t) // before any clock starts
	for _, name := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runs := runCount(t, name)
			spec := storeurltest.Fresh(t, name)
			sum := crashRuns(t, name, spec, runs, parallelCount(t, name), false)
			t.Log(sum)
			for _, p := range sum.problems {
				t.Log(p)
			}
			if sum.runs != runs {
				t.Fatalf("%d of %d runs completed", sum.runs, runs)
			}
			if sum.duplicates != 0 || sum.lost != 0 || sum.wrong != 0 {
				t.Errorf("duplicates %d, lost %d, wrong answers %d: want 0", sum.duplicates, sum.lost, sum.wrong)
			}
			if sum.keyReused != sum.changed {
				t.Errorf("%d of %d changed retries refused with key_reused", sum.keyReused, sum.changed)
			}
			if want := int64(runs * clients * opsPerClient); sum.entries != want {
				t.Errorf("%d entries, want %d (one per op)", sum.entries, want)
			}
			for i, p := range pointOrder {
				if i < runs && sum.kills[p] == 0 {
					t.Errorf("no kill at %s", p)
				}
			}
		})
	}
}

// TestCrashWithoutOpIDs runs the same crash runs against a server whose tool
// takes no op id: a retry after a kill between commit and response appends a
// second entry, and the test must see it. Its 3 runs go at once, as
// Firestore's do, so that the figures of concurrent runs are shown to add
// up.
func TestCrashWithoutOpIDs(t *testing.T) {
	t.Parallel()
	serverBinary(t)
	spec := storeurltest.Fresh(t, "sqlite")
	sum := crashRuns(t, "sqlite (op ids off)", spec, 3, 3, true)
	t.Log(sum)
	if sum.runs != 3 {
		t.Fatalf("%d of 3 runs completed", sum.runs)
	}
	if sum.kills[crashtest.PointCommitted] == 0 {
		t.Fatalf("no kill between commit and response")
	}
	if sum.duplicates == 0 {
		t.Errorf("no duplicate found with op ids off: the crash test cannot see the failure it exists for")
	}
	// Every changed retry appends, and nothing is lost: each entry beyond
	// one per op is a duplicate.
	if sum.accepted != sum.changed || sum.duplicates < int(sum.accepted) || sum.entries != sum.ops+int64(sum.duplicates) {
		t.Errorf("%d of %d changed retries accepted, %d duplicates, %d entries for %d ops: the runs' figures do not add up",
			sum.accepted, sum.changed, sum.duplicates, sum.entries, sum.ops)
	}
}
