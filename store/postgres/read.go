package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/sdk/idem/backend"
)

// Read implements backend.Reader: it reads the document at k into dst (dst may be
// nil) with one SELECT outside any transaction, on a pooled connection, and
// returns its version. It sees the latest committed state. A document that is
// absent, or whose expiry is not after Options.Now (read before the SELECT,
// as Get does), reports idem.ErrNotFound and version 0. An invalid key fails
// with an error wrapping backend.ErrInvalidKey before anything is sent.
func (s *Store) Read(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	now := s.opts.Now()
	c, release, err := s.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	var r stored
	// By its prepared name, as in transactions (see tx.prepared), once
	// more if that statement was stale.
	for range 2 {
		r, err = s.readOn(ctx, c.Conn(), k, now, dst)
		if !s.forgetStale(ctx, c.Conn(), err) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, errDecoding) {
			return 0, err
		}
		return 0, poolerHint(mapErr(err))
	}
	if !r.live {
		return 0, backend.ErrNotFound
	}
	return backend.Version(r.version), nil
}

// stored is what Read found at a key.
type stored struct {
	version int64
	live    bool // found, and not expired at the reading's clock
}

// errDecoding marks a document that was read but could not be decoded.
var errDecoding = errors.New("postgres: decoding document")

// readFormats are the result formats of the get statement read directly:
// version and expires_at in binary, the document as jsonb's text.
var readFormats = []int16{pgx.BinaryFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode}

// readOn reads k on conn and decodes a live document into dst. With the
// store's statements prepared by name it runs the prepared statement on
// the wire connection and decodes the document from the bytes received,
// without pgx's scanning and the copy it makes. Otherwise, or when the
// connection has a tracer (which sees only what goes through pgx), it
// sends the statement through pgx: by its prepared name, or the SQL as the
// pool's mode does.
func (s *Store) readOn(ctx context.Context, conn *pgx.Conn, k backend.Key, now time.Time, dst any) (stored, error) {
	name, err := s.prepared(ctx, conn, s.q.get)
	if err != nil {
		return stored{}, err
	}
	if !s.direct {
		var (
			r   stored
			doc []byte
			exp *time.Time
		)
		err := conn.QueryRow(ctx, name, k.Collection, k.StoredID()).Scan(&r.version, &doc, &exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return stored{}, nil
		}
		if err != nil {
			return stored{}, err
		}
		r.live = exp == nil || backend.Live(*exp, now)
		if r.live && dst != nil {
			if err := decodeDoc(doc, dst); err != nil {
				return stored{}, err
			}
		}
		return r, nil
	}
	// Text parameters are the key's bytes as they are.
	rr := conn.PgConn().ExecPrepared(ctx, name, [][]byte{[]byte(k.Collection), []byte(k.StoredID())}, nil, readFormats)
	var r stored
	var derr error
	for rr.NextRow() {
		vals := rr.Values()
		if len(vals) != 3 || len(vals[0]) != 8 || vals[1] == nil || vals[2] != nil && len(vals[2]) != 8 {
			derr = fmt.Errorf("%w: unexpected columns", errDecoding)
			continue
		}
		r.version = int64(binary.BigEndian.Uint64(vals[0]))
		r.live = vals[2] == nil || backend.Live(timestamptz(vals[2]), now)
		if r.live && dst != nil {
			// The document's bytes are the connection's read buffer,
			// valid until the next message: decoders copy what they keep.
			derr = decodeDoc(vals[1], dst)
		}
	}
	if _, err := rr.Close(); err != nil {
		return stored{}, err
	}
	if derr != nil {
		return stored{}, derr
	}
	return r, nil
}

// pgEpoch is where PostgreSQL's binary timestamps count from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// timestamptz decodes a binary timestamptz (microseconds since pgEpoch,
// infinity as the largest and smallest int64); infinity is a time no clock
// reaches, -infinity the earliest time.
func timestamptz(b []byte) time.Time {
	us := int64(binary.BigEndian.Uint64(b))
	switch us {
	case math.MaxInt64:
		return time.Unix(1<<62, 0)
	case math.MinInt64:
		return time.Unix(-1<<62, 0)
	}
	return time.Unix(pgEpoch.Unix()+us/1e6, us%1e6*1e3)
}

// decodeDoc decodes a stored document into dst. Stored documents are
// jsonb's text, valid JSON, so a dst that decodes itself (a
// json.Unmarshaler, as the op record is) is given it directly, without
// encoding/json's validating scan of the whole document first.
func decodeDoc(doc []byte, dst any) error {
	if u, ok := dst.(json.Unmarshaler); ok {
		if v := reflect.ValueOf(dst); v.Kind() == reflect.Pointer && !v.IsNil() {
			if err := u.UnmarshalJSON(doc); err != nil {
				return fmt.Errorf("%w: %w", errDecoding, err)
			}
			return nil
		}
	}
	if err := json.Unmarshal(doc, dst); err != nil {
		return fmt.Errorf("%w: %w", errDecoding, err)
	}
	return nil
}
