package storebench

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// fakeByHand is a ByHand in memory whose protocols are both the optimistic
// one; its fields break it in the ways runByHand must catch.
type fakeByHand struct {
	mu    sync.Mutex
	ops   map[string]Added
	notes map[string]Note

	repeatWrites bool // a repeat writes its note again
	repeatFresh  bool // a repeat is not reported as one
	repeatOther  bool // a repeat answers another result
	selectOther  bool // Select reads another result
}

func newFakeByHand() *fakeByHand {
	return &fakeByHand{ops: map[string]Added{}, notes: map[string]Note{}}
}

func (f *fakeByHand) Optimistic(_ context.Context, opID, noteID string, in Note) (Added, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if out, ok := f.ops[opID]; ok {
		if f.repeatWrites {
			f.notes[noteID] = in
		}
		if f.repeatOther {
			out.ID += "x"
		}
		return out, !f.repeatFresh, nil
	}
	f.notes[noteID] = in
	f.ops[opID] = Added{ID: noteID}
	return f.ops[opID], false, nil
}

func (f *fakeByHand) Pipelined(ctx context.Context, opID, noteID string, in Note) (Added, bool, error) {
	return f.Optimistic(ctx, opID, noteID, in)
}

func (f *fakeByHand) Select(_ context.Context, opID string) (Added, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.ops[opID]
	if f.selectOther {
		out.ID += "x"
	}
	return out, nil
}

func (f *fakeByHand) Notes(_ context.Context, ids []string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := f.notes[id]; ok {
			n++
		}
	}
	return n, nil
}

// runByHand passes protocols that answer a repeat from the stored result
// and write nothing, and refuses, naming what is wrong, one that writes the
// note again on a repeat, does not report a repeat, answers it with another
// result, or whose SELECT reads another result.
func TestRunByHandChecksRepeats(t *testing.T) {
	ctx := context.Background()
	ok := newFakeByHand()
	for range 3 {
		if _, err := runByHand(ctx, ok); err != nil {
			t.Fatalf("a sound protocol was refused: %v", err)
		}
	}
	if len(ok.notes) != 6 {
		t.Fatalf("three rounds of two protocols left %d notes, want 6", len(ok.notes))
	}
	for _, c := range []struct {
		name  string
		spoil func(f *fakeByHand)
		want  string
	}{
		{"note written twice", func(f *fakeByHand) { f.repeatWrites = true }, "left 2 notes, want 1"},
		{"repeat not reported", func(f *fakeByHand) { f.repeatFresh = true }, "a repeat was not answered as one"},
		{"repeat answers another result", func(f *fakeByHand) { f.repeatOther = true }, "want the first call's"},
		{"select reads another result", func(f *fakeByHand) { f.selectOther = true }, "select read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeByHand()
			c.spoil(f)
			_, err := runByHand(ctx, f)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("runByHand = %v, want an error with %q", err, c.want)
			}
		})
	}
}
