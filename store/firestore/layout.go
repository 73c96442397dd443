package firestore

import (
	"strings"

	"github.com/idemkit/sdk/idem/backend"
)

// escapeName maps a valid key part (an owner, collection or id) to a
// Firestore document or collection id. Firestore refuses ".", ".." and ids
// of the form __.*__; every valid key part that begins with '.', '_' or '%'
// is written with a '%' in front, and nothing else changes. The map is
// injective: an id beginning with '%' came from an escaped part, any other
// id is the part itself, and no result is ".", ".." or __.*__.
func escapeName(s string) string {
	if s != "" && (s[0] == '.' || s[0] == '_' || s[0] == '%') {
		return "%" + s
	}
	return s
}

// unescapeName inverts escapeName.
func unescapeName(s string) string {
	return strings.TrimPrefix(s, "%")
}

// path returns the document path of k: {owners}/{owner}/{collection}/{id}
// for a key with an owner, {prefix}{collection}/{id} without one.
func (s *Store) path(k backend.Key) string {
	if k.Owner != "" {
		return s.owners + "/" + escapeName(k.Owner) + "/" + escapeName(k.Collection) + "/" + escapeName(k.ID)
	}
	return s.prefix + escapeName(k.Collection) + "/" + escapeName(k.ID)
}
