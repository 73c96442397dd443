package kit

import "github.com/idemkit/sdk/idem/backend"

// indexFrom is how many items a keyedList looks through one by one before
// it indexes them in a map.
const indexFrom = 8

// keyedList holds one item per key, in the order of each key's first item:
// found by looking through them one by one while there are few, through a
// map of positions past indexFrom. Most transactions touch a few keys.
type keyedList[T interface{ key() backend.Key }] struct {
	items []T
	at    map[backend.Key]int
}

// find returns the item at k, or nil.
func (l *keyedList[T]) find(k backend.Key) *T {
	if l.at != nil {
		if i, ok := l.at[k]; ok {
			return &l.items[i]
		}
		return nil
	}
	for i := range l.items {
		if l.items[i].key() == k {
			return &l.items[i]
		}
	}
	return nil
}

// add appends x, whose key has no item yet.
func (l *keyedList[T]) add(x T) {
	l.items = append(l.items, x)
	switch n := len(l.items); {
	case l.at != nil:
		l.at[x.key()] = n - 1
	case n > indexFrom:
		l.at = make(map[backend.Key]int, 2*n)
		for i := range l.items {
			l.at[l.items[i].key()] = i
		}
	}
}

func (r Read) key() backend.Key  { return r.Key }
func (w Write) key() backend.Key { return w.Key }
