// Package postgresurl links PostgreSQL into package storekind: a program
// that imports it opens
//
//	postgres://USER@HOST:PORT/DB?...   (or postgresql://)
//
// as a pgx pool on that URL, with the store's tables (created when
// missing); the query parameter table_prefix=P puts P in front of their
// names, to keep stores apart in one database.
package postgresurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	"github.com/idemkit/sdk/store/postgres"
)

func init() {
	storekind.Register(storekind.Kind{Schemes: []string{"postgres", "postgresql"}, Usage: "postgres://...", Open: open})
}

func open(ctx context.Context, spec string, o storekind.Options) (idem.Store, func(), error) {
	u, err := url.Parse(spec)
	if err != nil {
		return nil, nil, errors.New("store postgres: the URL does not parse")
	}
	q := u.Query()
	prefix := q.Get("table_prefix")
	q.Del("table_prefix")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return nil, nil, fmt.Errorf("store postgres: %w", err)
	}
	s, err := postgres.New(pool, &postgres.Options{TablePrefix: prefix, NoSweep: o.NoSweep, SweepEvery: o.SweepEvery})
	if err == nil {
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = s.Migrate(mctx)
		cancel()
	}
	if err != nil {
		if s != nil {
			s.Close()
		}
		pool.Close()
		return nil, nil, fmt.Errorf("store postgres: %w", err)
	}
	// The store first: its background sweep stops before the pool closes.
	return s, func() { s.Close(); pool.Close() }, nil
}
