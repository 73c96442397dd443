package sqlite

// Waiting returns the number of transactions in line for s's writer.
func Waiting(s *Store) int { return s.writer.Waiting() }
