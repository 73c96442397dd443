package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries holds the store's SQL, with its table and sequence names filled in.
type queries struct {
	table  string
	schema []string

	get    string // $1 collection, $2 id -> version, doc, expires_at
	create string // $1 collection, $2 id, $3 doc, $4 expires_at, $5 now -> version; no row: a live document is there
	// createOrFail is create for a Create sent later, with the next
	// statement or the commit: instead of returning no row it fails
	// (22012), which aborts the transaction before its COMMIT runs. It
	// returns no row.
	createOrFail string
	// insert is a Create sent later of a document without expiry, when
	// this tx knows nothing of the key: a plain INSERT, cheaper than
	// ON CONFLICT, which fails (23505) on any row there, live or expired.
	insert string // $1 collection, $2 id, $3 doc
	put    string // $1 collection, $2 id, $3 doc, $4 expires_at
	update string // $1 collection, $2 id, $3 doc, $4 expires_at, $5 version, $6 now -> version
	delete string // $1 collection, $2 id, $3 version (0: any), $4 now -> version
	sweep  string // $1 now, $2 from (an expiry), $3 limit -> deleted, largest expiry deleted

	// names holds, for each statement a transaction sends (BEGIN and
	// COMMIT included), the name it is prepared under on a connection.
	names map[string]string
}

const (
	beginSQL = "begin isolation level serializable"
	// beginReadOnlySQL begins a RunReadOnly: a snapshot taken at its first
	// statement, which never waits for a lock, never fails for a
	// concurrent transaction (as a SERIALIZABLE READ ONLY one may, unless
	// DEFERRABLE, which waits for a safe snapshot instead), and takes no
	// predicate locks that could make a SERIALIZABLE writer fail.
	beginReadOnlySQL = "begin isolation level repeatable read read only"
	commitSQL        = "commit"
)

func newQueries(prefix string) queries {
	table := pgx.Identifier{prefix + "idem_docs"}.Sanitize()
	seq := pgx.Identifier{prefix + "idem_docs_version_seq"}.Sanitize()
	index := pgx.Identifier{prefix + "idem_docs_expires_at_idx"}.Sanitize()
	// The sequence is passed to nextval as a string literal; the sanitized
	// identifier holds no quote characters because the prefix is checked.
	next := "nextval('" + seq + "')"
	r := strings.NewReplacer("{t}", table, "{next}", next, "{seq}", seq, "{index}", index)
	q := queries{table: table}
	q.schema = []string{
		r.Replace(`CREATE SEQUENCE IF NOT EXISTS {seq}`),
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	collection text COLLATE "C" NOT NULL,
	id text COLLATE "C" NOT NULL,
	version bigint NOT NULL,
	doc jsonb NOT NULL,
	expires_at timestamptz,
	PRIMARY KEY (collection, id)
)`),
		r.Replace(`CREATE INDEX IF NOT EXISTS {index} ON {t} (expires_at) WHERE expires_at IS NOT NULL`),
	}
	q.get = r.Replace(`SELECT version, doc, expires_at FROM {t} WHERE collection = $1 AND id = $2`)
	// A versions comes from the sequence, never from the old row, so a key
	// deleted and created again never repeats a version.
	q.create = r.Replace(`INSERT INTO {t} AS d (collection, id, version, doc, expires_at)
VALUES ($1, $2, {next}, $3, $4)
ON CONFLICT (collection, id) DO UPDATE
SET version = EXCLUDED.version, doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at
WHERE d.expires_at IS NOT NULL AND d.expires_at <= $5
RETURNING version`)
	// A live row is divided by zero: division_by_zero (22012) at run
	// time, since the dividend is a column of the row, which the planner
	// cannot fold, and CASE evaluates only the branch it takes. One
	// statement, without RETURNING: in a pipeline it costs less than
	// create wrapped in a query that fails on no row.
	q.createOrFail = r.Replace(`INSERT INTO {t} AS d (collection, id, version, doc, expires_at)
VALUES ($1, $2, {next}, $3, $4)
ON CONFLICT (collection, id) DO UPDATE
SET version = CASE WHEN d.expires_at IS NOT NULL AND d.expires_at <= $5 THEN EXCLUDED.version ELSE d.version / 0 END,
	doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at`)
	q.insert = r.Replace(`INSERT INTO {t} (collection, id, version, doc) VALUES ($1, $2, {next}, $3)`)
	q.put = r.Replace(`INSERT INTO {t} (collection, id, version, doc, expires_at)
VALUES ($1, $2, {next}, $3, $4)
ON CONFLICT (collection, id) DO UPDATE
SET version = EXCLUDED.version, doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at`)
	q.update = r.Replace(`UPDATE {t} SET version = {next}, doc = $3, expires_at = $4
WHERE collection = $1 AND id = $2 AND version = $5 AND (expires_at IS NULL OR expires_at > $6)
RETURNING version`)
	q.delete = r.Replace(`DELETE FROM {t}
WHERE collection = $1 AND id = $2 AND ($3::bigint = 0 OR version = $3::bigint) AND (expires_at IS NULL OR expires_at > $4)
RETURNING version`)
	// Sweep deletes one batch at or after $2 on the expiry index (keyset:
	// it continues from the last batch's largest expiry, so it never walks
	// again the index entries of the rows it deleted) and returns how many
	// rows it deleted and their largest expiry.
	q.sweep = r.Replace(`WITH victims AS (
	SELECT collection, id FROM {t}
	WHERE expires_at >= $2 AND expires_at <= $1
	ORDER BY expires_at
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM {t} d USING victims v
	WHERE d.collection = v.collection AND d.id = v.id AND d.expires_at <= $1
	RETURNING d.expires_at
)
SELECT count(*), max(expires_at) FROM gone`)
	q.names = make(map[string]string)
	for _, sql := range []string{q.get, q.create, q.createOrFail, q.insert, q.put, q.update, q.delete, beginSQL, beginReadOnlySQL, commitSQL} {
		sum := sha256.Sum256([]byte(sql))
		q.names[sql] = "idemkit_" + hex.EncodeToString(sum[:8])
	}
	return q
}
