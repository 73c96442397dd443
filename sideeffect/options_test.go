package sideeffect

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/store/memory"
)

// New fills a zero field with its default, keeps a set one, and turns a
// negative Wait into no wait at all.
func TestNewOptions(t *testing.T) {
	mem := memory.New(nil)
	clock := func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name        string
		opts        *Options
		lease, wait time.Duration
		testClock   bool
	}{
		{"nil", nil, DefaultLease, DefaultWait, false},
		{"zero", &Options{}, DefaultLease, DefaultWait, false},
		{"set", &Options{Lease: 2 * time.Minute, Wait: time.Second, Clock: clock}, 2 * time.Minute, time.Second, true},
		{"MinLease", &Options{Lease: MinLease}, MinLease, DefaultWait, false},
		{"negative wait", &Options{Wait: -time.Second}, DefaultLease, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(mem, tc.opts).cfg
			if c.lease != tc.lease || c.wait != tc.wait {
				t.Errorf("lease %v wait %v, want %v %v", c.lease, c.wait, tc.lease, tc.wait)
			}
			if c.margin() <= 0 || c.grace() <= 0 {
				t.Errorf("margin %v grace %v, want both above zero", c.margin(), c.grace())
			}
			if got := c.now(); tc.testClock != got.Equal(clock()) {
				t.Errorf("clock reads %v; the given clock used: %v", got, tc.testClock)
			}
		})
	}
}

// A nil store or a lease below MinLease is a mistake in the server's code:
// New panics with a message that names it.
func TestNewPanicsOnBadOptions(t *testing.T) {
	mem := memory.New(nil)
	for _, tc := range []struct {
		name string
		new  func()
		want string
	}{
		{"nil store", func() { New(nil, nil) }, "nil store"},
		{"lease under MinLease", func() { New(mem, &Options{Lease: MinLease - 1}) }, "MinLease"},
		{"negative lease", func() { New(mem, &Options{Lease: -time.Minute}) }, "MinLease"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tc.want) {
					t.Errorf("panic %v, want one naming %q", r, tc.want)
				}
			}()
			tc.new()
		})
	}
}
