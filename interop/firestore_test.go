package interop_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/idemkit/sdk/internal/testenv"
)

// firestoreHost returns the Firestore emulator's host:port from
// IDEMKIT_FIRESTORE_EMULATOR_HOST (scripts/with-firestore.sh sets it).
// Without one the test is skipped, except in CI, where a missing emulator
// fails the run.
func firestoreHost(t *testing.T) string {
	t.Helper()
	return testenv.Service(t, "IDEMKIT_FIRESTORE_EMULATOR_HOST", "scripts/with-firestore.sh")
}

var firestorePrefixes atomic.Int64

// TestTypesOnFirestore runs the types server's scenarios with each client
// over each transport, on store/firestore: collections of their own per
// client and transport, shared by the stdio server processes of its
// sessions (so a replay on a new session finds the op record).
func TestTypesOnFirestore(t *testing.T) {
	host := firestoreHost(t)
	runMatrix(t, bins.types, typesPlan(), typesChecks, func(t *testing.T) []string {
		prefix := fmt.Sprintf("i%d_%d_", os.Getpid(), firestorePrefixes.Add(1))
		return []string{"-firestore", host, "-prefix", prefix, "-stateless"}
	})
}
