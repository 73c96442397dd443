package crashtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/crashtest"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/internal/storeurl"
)

// findings are what the store holds after a run, judged against what the
// clients meant and saw.
type findings struct {
	entries    int64 // entries in the log
	duplicates int   // entries beyond the first of one op
	lost       int   // committed ops without their effect, or effects without their op record
	wrong      int   // answers (sent or stored) that name another op's entry
	problems   []string
}

func (f *findings) problem(format string, args ...any) {
	if len(f.problems) < 10 {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// read reads the document at k into dst outside any transaction when the
// store can, and reports whether it is there.
func read(ctx context.Context, s idem.Store, k idem.Key, dst any) (bool, error) {
	var err error
	if r, ok := s.(backend.Reader); ok {
		_, err = r.Read(ctx, k, dst)
	} else {
		err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, k, dst)
			return err
		})
	}
	if errors.Is(err, idem.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// entryAt names one entry.
type entryAt struct {
	log string
	seq int64
}

// verify reads the logs of ops, and their op records, from the store spec
// names, with no server running. withRecords says whether the server stored
// op records (not when it ran -unsafe).
func verify(ctx context.Context, spec string, ops []*op, withRecords bool) (*findings, error) {
	s, closeStore, err := storeurl.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	f := &findings{}

	bySeq := map[entryAt]string{} // entry -> tag
	byTag := map[string]int{}     // tag -> entries
	logs := map[string]bool{}
	for _, o := range ops {
		if logs[o.log] {
			continue
		}
		logs[o.log] = true
		var c crashtest.Counter
		if _, err := read(ctx, s, crashtest.CounterKey(o.log), &c); err != nil {
			return nil, err
		}
		// Every call read the log's limit; none wrote one.
		if ok, err := read(ctx, s, crashtest.LimitKey(o.log), nil); err != nil {
			return nil, err
		} else if ok {
			f.wrong++
			f.problem("log %s has a limit, which no call writes", o.log)
		}
		f.entries += c.N
		for seq := int64(1); seq <= c.N; seq++ {
			var e crashtest.Entry
			ok, err := read(ctx, s, crashtest.EntryKey(o.log, seq), &e)
			if err != nil {
				return nil, err
			}
			if !ok || e.Seq != seq {
				// The counter and the entry are written in one transaction.
				f.lost++
				f.problem("log %s: the counter says %d entries, entry %d is missing or misnumbered", o.log, c.N, seq)
				continue
			}
			bySeq[entryAt{o.log, seq}] = e.Tag
			byTag[e.Tag]++
		}
	}

	meant := map[string]bool{}
	for _, o := range ops {
		meant[o.id] = true
		n := byTag[o.id]
		if n > 1 {
			f.duplicates += n - 1
			f.problem("op %s landed %d times", o.id, n)
		}
		if o.acked && bySeq[entryAt{o.log, o.seq}] != o.id {
			f.wrong++
			f.problem("op %s was answered with entry %d, which holds op %q", o.id, o.seq, bySeq[entryAt{o.log, o.seq}])
		}
		var rec oprecord.Record
		hasRecord := false
		if withRecords {
			if hasRecord, err = read(ctx, s, oprecord.Key("", crashtest.ToolName, o.id), &rec); err != nil {
				return nil, err
			}
		}
		switch {
		case n == 0 && (o.acked || hasRecord):
			f.lost++
			f.problem("op %s committed (answered %v, op record %v) but has no entry", o.id, o.acked, hasRecord)
		case n > 0 && withRecords && !hasRecord:
			f.lost++
			f.problem("op %s has an entry but no op record", o.id)
		}
		if hasRecord {
			var a crashtest.Appended
			if err := json.Unmarshal(rec.StructuredOutput(), &a); err != nil || bySeq[entryAt{o.log, a.Seq}] != o.id {
				f.wrong++
				f.problem("op %s: its op record answers entry %d, which holds op %q", o.id, a.Seq, bySeq[entryAt{o.log, a.Seq}])
			}
		}
	}
	for tag, n := range byTag {
		if !meant[tag] {
			f.lost++ // an effect no op of this run owns
			f.problem("%d entries of an op no client sent (%q)", n, tag)
		}
	}
	return f, nil
}
