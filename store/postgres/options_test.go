package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/store/postgres"
)

// A negative option is refused at construction, naming the field; zero
// means the default. Neither the pool nor New connects.
func TestNegativeOptions(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://idemkit@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for name, opts := range map[string]*postgres.Options{
		"MaxDocumentBytes": {MaxDocumentBytes: -1},
		"MaxAttempts":      {MaxAttempts: -1},
		"SweepEvery":       {SweepEvery: -1},
	} {
		if _, err := postgres.New(pool, opts); err == nil || !strings.Contains(err.Error(), "Options."+name+" may not be negative") {
			t.Errorf("New with a negative %s: %v, want an error naming it", name, err)
		}
	}
	s, err := postgres.New(pool, &postgres.Options{})
	if err != nil {
		t.Fatalf("New with zero options: %v", err)
	}
	s.Close()
}
