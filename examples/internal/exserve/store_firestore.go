//go:build firestore || allstores

package exserve

// Firestore, for -store firestore://... (Google's Firestore client and gRPC): linked only under this tag or allstores (store.go).
import _ "github.com/idemkit/sdk/internal/storeurl/firestoreurl"
