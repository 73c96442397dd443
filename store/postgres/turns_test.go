package postgres_test

import (
	"testing"

	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

// TestConnectionsTakeTurnsByScope: on a pool of one connection, the
// scopes waiting for it take turns, so one caller's queue never stands all
// in front of another's.
func TestConnectionsTakeTurnsByScope(t *testing.T) {
	s := newStore(t, newPool(t, 1), nil)
	storetest.TurnsByScope(t, s, func() int { return postgres.Waiting(s) })
}
