package kit

import (
	"errors"
	"testing"
	"time"
)

// TestPacer: a round that reaches its limit goes again after as long as it
// took; one that deleted more than half of it halves the wait, down to min;
// one that deleted under an eighth, or failed, doubles it, up to max.
func TestPacer(t *testing.T) {
	p := pacer{min: time.Second, max: time.Minute, limit: 1000}
	p.wait = p.min
	fail := errors.New("down")
	for i, c := range []struct {
		n    int
		took time.Duration
		err  error
		want time.Duration
	}{
		{0, 0, nil, 2 * time.Second},
		{0, 0, nil, 4 * time.Second},
		{200, 0, nil, 4 * time.Second}, // between an eighth and a half: as before
		{124, 0, nil, 8 * time.Second},
		{0, 0, fail, 16 * time.Second},
		{0, 0, nil, 32 * time.Second},
		{0, 0, nil, time.Minute},
		{0, 0, nil, time.Minute},
		{600, 0, nil, 30 * time.Second},
		{501, 0, nil, 15 * time.Second},
		{1000, 300 * time.Millisecond, nil, 300 * time.Millisecond},
		{1000, 0, nil, time.Millisecond},
		{1000, 0, fail, 2 * time.Second}, // a failed round is no backlog
		{999, 0, nil, time.Second},
		{999, 0, nil, time.Second},
	} {
		if got := p.next(c.n, c.took, c.err); got != c.want {
			t.Fatalf("round %d: %d deleted in %v (err %v): wait %v, want %v", i, c.n, c.took, c.err, got, c.want)
		}
	}
}
