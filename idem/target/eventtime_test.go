package target_test

import (
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
)

func TestEventTime(t *testing.T) {
	at := func(hm string) time.Time {
		v, err := time.Parse("15:04:05", hm)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	start, now := at("14:00:00"), at("16:40:00")
	skew := 30 * time.Second
	cases := []struct {
		name    string
		at      time.Time
		want    time.Time
		wantErr idem.Code
	}{
		{"queued offline stop keeps its own time", at("14:05:00"), at("14:05:00"), ""},
		{"no timestamp happens now", time.Time{}, now, ""},
		{"ahead of the server clock is clamped", at("17:00:00"), now, ""},
		{"within skew before start moves to start", at("13:59:45"), start, ""},
		{"before start is refused", at("13:00:00"), time.Time{}, target.CodeEventBeforeStart},
		{"exactly start", start, start, ""},
		{"exactly now", now, now, ""},
	}
	for _, c := range cases {
		got, err := target.EventTime(c.at, start, now, skew)
		if idem.CodeOf(err) != c.wantErr {
			t.Errorf("%s: error %v, want code %q", c.name, err, c.wantErr)
		}
		if !got.Equal(c.want) {
			t.Errorf("%s: %s, want %s", c.name, got.Format(time.TimeOnly), c.want.Format(time.TimeOnly))
		}
	}
}

// A server clock behind the record's start (skew between servers) never
// gives a time before start, and an event with no time of its own is never
// refused.
func TestEventTimeStartAheadOfNow(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	start := now.Add(2 * time.Second)
	for _, at := range []time.Time{{}, start.Add(-time.Second), now} {
		got, err := target.EventTime(at, start, now, 5*time.Second)
		if err != nil || got.Before(start) {
			t.Errorf("EventTime(%v) = %v, %v; want start or later", at, got, err)
		}
	}
	if _, err := target.EventTime(now.Add(-time.Minute), now, now, -time.Hour); idem.CodeOf(err) != target.CodeEventBeforeStart {
		t.Errorf("negative skew: %v, want event_before_start", err)
	}
}
