package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A stale statement of the store is recognized whatever the server's
// language (the quotes around its name are part of the translation); a
// handler's own missing statement is not the store's.
func TestStaleStatementLocalized(t *testing.T) {
	for _, msg := range []string{
		`prepared statement "idemkit_0123456789abcdef" does not exist`,
		`vorbereitete Anweisung »idemkit_0123456789abcdef« existiert nicht`,
		`no existe la sentencia preparada «idemkit_0123456789abcdef»`,
		`l'instruction préparée « idemkit_0123456789abcdef » n'existe pas`,
	} {
		pe := &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR", Code: "26000", Message: msg, Routine: "FetchPreparedStatement"}
		if !staleStatement(pe) {
			t.Errorf("staleStatement(26000 %q) = false", msg)
		}
	}
	mine := &pgconn.PgError{Code: "26000", Message: `prepared statement "no_such_statement" does not exist`, Routine: "FetchPreparedStatement"}
	if staleStatement(mine) {
		t.Error("a handler's own missing statement was taken for the store's")
	}
}
