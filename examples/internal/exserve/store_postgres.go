//go:build postgres || allstores

package exserve

// PostgreSQL, for -store postgres://... (pgx): linked only under this tag or allstores (store.go).
import _ "github.com/idemkit/sdk/internal/storeurl/postgresurl"
