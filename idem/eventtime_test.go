package idem_test

import (
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
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
		{"before start is refused", at("13:00:00"), time.Time{}, idem.CodeEventBeforeStart},
		{"exactly start", start, start, ""},
		{"exactly now", now, now, ""},
	}
	for _, c := range cases {
		got, err := idem.EventTime(c.at, start, now, skew)
		if idem.CodeOf(err) != c.wantErr {
			t.Errorf("%s: error %v, want code %q", c.name, err, c.wantErr)
		}
		if !got.Equal(c.want) {
			t.Errorf("%s: %s, want %s", c.name, got.Format(time.TimeOnly), c.want.Format(time.TimeOnly))
		}
	}
}
