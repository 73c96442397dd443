package sqlite

// Waiting returns the number of transactions in line for s's writer.
func Waiting(s *Store) int {
	s.writer.mu.Lock()
	defer s.writer.mu.Unlock()
	n := 0
	for _, q := range s.writer.queues {
		n += len(q)
	}
	return n
}
