// Package target serves tools that act on one record of several without
// always naming it: stop the running timer, close the open session. A call
// sent again after a lost answer, or queued offline and delivered later,
// must not act on whatever record runs when it arrives.
//
//	id, err := target.Resolve(target.Query{ID: in.SessionID, Owned: onThisDevice, Others: elsewhere, Request: req})
//	if err != nil {
//		return nil, out, err // ambiguous_target, with every candidate's id
//	}
//	end, err := target.EventTime(at, session.Start, now, time.Minute)
//
// [Resolve] guesses the record only for a live call whose device runs
// exactly one; otherwise the caller is refused with the candidates and
// picks. [EventTime] records an event at its own time, not its arrival.
// examples/focus uses both.
package target
