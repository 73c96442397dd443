package storebench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
)

// ByHand is what a server would write by hand in place of the middleware,
// for [BenchmarkByHand]: the benchmark's note and an op record of its own,
// in tables of its own (each with a primary key and a jsonb column), on the
// store's connections. A protocol's call either writes the note under
// noteID and stores the result Added{ID: noteID} under opID, in one
// transaction, or finds opID stored, writes nothing and returns the stored
// result with repeat set.
type ByHand interface {
	// Optimistic claims opID with an insert that does nothing on
	// conflict; on conflict it reads the stored result, else it writes
	// the note and the result and commits.
	Optimistic(ctx context.Context, opID, noteID string, in Note) (out Added, repeat bool, err error)
	// Pipelined sends the note's insert and the op record's, with the
	// transaction's begin and commit, in one round trip; a unique
	// violation on the op record is a repeat.
	Pipelined(ctx context.Context, opID, noteID string, in Note) (out Added, repeat bool, err error)
	// Select reads opID's stored result with one query and decodes it:
	// the floor of a replay.
	Select(ctx context.Context, opID string) (Added, error)
	// Notes counts the notes of ids that the tables hold.
	Notes(ctx context.Context, ids []string) (int, error)
}

// BenchmarkByHand is [Benchmark] with the protocols a server would
// otherwise write by hand timed beside the middleware's calls, in the same
// rotation, so that their ratios come from one run. newStore returns a
// store and a [ByHand] on the same connections; only calls uses the
// ByHand. To each iteration of calls it adds an optimistic insert, a
// pipelined insert and a raw SELECT of the pipelined one's result (right
// after its commit, as a replay follows its first call's), and the metrics
// optimistic-ns, pipelined-ns, select-ns and the ratios first/optimistic,
// first/pipelined and replay/select, and replay/select-p50, the ratio of
// the rounds' medians. Every iteration then sends both
// protocols' op ids again, untimed, and fails the benchmark if a repeat is
// not answered with the first call's result or a note was written twice.
func BenchmarkByHand(b *testing.B, newStore func(b *testing.B) (idem.Store, ByHand)) {
	benchmark(b, newStore, GoSDK)
}

// handTimes is what one round of runByHand measured.
type handTimes struct{ optimistic, pipelined, selected time.Duration }

// runByHand times, on h, a first call of each protocol (each with an op id
// of its own) and then the SELECT of the pipelined call's result; then it
// sends both op ids again, untimed, and checks that each repeat was
// answered with its first call's result and that each protocol holds one
// note for its op id: a figure of a protocol that writes twice is not a
// figure.
func runByHand(ctx context.Context, h ByHand) (handTimes, error) {
	seq := strconv.FormatInt(benchSeq.Add(1), 10)
	newNoteID := func() string { return "n" + strconv.FormatInt(benchSeq.Add(1), 10) }
	protocols := []struct {
		name string
		call func(ctx context.Context, opID, noteID string, in Note) (Added, bool, error)
	}{{"optimistic", h.Optimistic}, {"pipelined", h.Pipelined}}
	var took [2]time.Duration
	var firsts [2]Added
	var notes [2][]string
	for i, p := range protocols {
		op, id := p.name+"-"+seq, newNoteID()
		notes[i] = append(notes[i], id)
		t0 := time.Now()
		out, repeat, err := p.call(ctx, op, id, Note{Text: op})
		took[i] = time.Since(t0)
		switch {
		case err != nil:
			return handTimes{}, fmt.Errorf("%s insert, first call: %w", p.name, err)
		case repeat:
			return handTimes{}, fmt.Errorf("%s insert: a first call was answered as a repeat", p.name)
		case out != Added{ID: id}:
			return handTimes{}, fmt.Errorf("%s insert: a first call returned %+v, want %+v", p.name, out, Added{ID: id})
		}
		firsts[i] = out
	}
	t0 := time.Now()
	got, err := h.Select(ctx, protocols[1].name+"-"+seq)
	selected := time.Since(t0)
	switch {
	case err != nil:
		return handTimes{}, fmt.Errorf("select: %w", err)
	case got != firsts[1]:
		return handTimes{}, fmt.Errorf("select read %+v, want the pipelined call's %+v", got, firsts[1])
	}
	for i, p := range protocols {
		op, id := p.name+"-"+seq, newNoteID()
		notes[i] = append(notes[i], id)
		out, repeat, err := p.call(ctx, op, id, Note{Text: op})
		switch {
		case err != nil:
			return handTimes{}, fmt.Errorf("%s insert, repeat: %w", p.name, err)
		case !repeat:
			return handTimes{}, fmt.Errorf("%s insert: a repeat was not answered as one", p.name)
		case out != firsts[i]:
			return handTimes{}, fmt.Errorf("%s insert: a repeat answered %+v, want the first call's %+v", p.name, out, firsts[i])
		}
		n, err := h.Notes(ctx, notes[i])
		switch {
		case err != nil:
			return handTimes{}, fmt.Errorf("%s insert: counting notes: %w", p.name, err)
		case n != 1:
			return handTimes{}, fmt.Errorf("%s insert: a first call and its repeat left %d notes, want 1", p.name, n)
		}
	}
	return handTimes{optimistic: took[0], pipelined: took[1], selected: selected}, nil
}
