package target

import (
	"time"

	"github.com/idemkit/sdk/idem"
)

// CodeEventBeforeStart: an event's timestamp is before the record began.
// Check the device clock or the record id.
const CodeEventBeforeStart idem.Code = "event_before_start"

// EventTime returns the time to record for an event that carries its own
// timestamp at: a stop queued on a phone at 14:05 and delivered at 16:40 is
// recorded at 14:05, not at its arrival. The result is never before start
// and, unless start itself is ahead of now, never after now.
//
//   - A zero at means the event has no timestamp of its own: it happens now
//     (or at start, if the server's clock reads a start still ahead).
//   - An at ahead of now (a device clock ahead of the server's) is clamped
//     to now.
//   - An at before start-skew is refused with an *idem.Error of code
//     [CodeEventBeforeStart]; one within skew before start (a device clock
//     slightly behind) is moved to start.
//
// skew is the clock difference tolerated between devices and the server; a
// negative skew counts as zero.
func EventTime(at, start, now time.Time, skew time.Duration) (time.Time, error) {
	skew = max(skew, 0)
	if at.IsZero() {
		if !start.IsZero() && now.Before(start) {
			return start, nil
		}
		return now, nil
	}
	if at.After(now) {
		at = now
	}
	if !start.IsZero() && at.Before(start) {
		if at.Before(start.Add(-skew)) {
			return time.Time{}, &idem.Error{Code: CodeEventBeforeStart, Message: "the event's time is before the record started; check the device clock or the record id"}
		}
		at = start
	}
	return at, nil
}
