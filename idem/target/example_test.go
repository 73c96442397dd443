package target_test

import (
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
)

func ExampleResolve() {
	onThisDevice := []idem.Candidate{{ID: "s-1", Label: "writing on phone"}}
	id, err := target.Resolve(target.Query{Owned: onThisDevice})
	fmt.Println(id, err)
	// The same stop, queued offline: it must name its record.
	_, err = target.Resolve(target.Query{Owned: onThisDevice, Queued: true})
	fmt.Println(idem.CodeOf(err))
	// Output:
	// s-1 <nil>
	// ambiguous_target
}

func ExampleEventTime() {
	start := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	now := start.Add(2*time.Hour + 40*time.Minute)
	end, _ := target.EventTime(start.Add(5*time.Minute), start, now, time.Minute)
	fmt.Println(end.Format(time.TimeOnly))
	// Output:
	// 14:05:00
}
