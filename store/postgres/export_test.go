package postgres

// Waiting returns the number of transactions and reads of s waiting for a
// connection in their turn.
func Waiting(s *Store) int { return s.turns.Waiting() }
