// Package storeurl opens the store a command-line value names, for the
// example servers and the interop suite's servers:
//
//	memory:                                     in memory, gone at exit
//	sqlite:PATH                                 SQLite file at PATH
//	postgres://USER@HOST:PORT/DB?...            PostgreSQL (pgx pool); table_prefix=P keeps stores apart
//	dynamodb://TABLE?endpoint=URL&region=R      DynamoDB table TABLE, created if missing
//	firestore://PROJECT?emulator=HOST:PORT&prefix=P  Firestore (the emulator when given)
//
// The store's own tables are created when missing (Migrate, CreateTable).
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/dynamo"
	idemfs "github.com/idemkit/sdk/store/firestore"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/sqlite"
)

// Usage is the grammar of a store value, for a flag's help text.
const Usage = "memory: | sqlite:PATH | postgres://... | dynamodb://TABLE?endpoint=URL | firestore://PROJECT?emulator=HOST:PORT"

// Options change how [OpenWith] opens a store.
type Options struct {
	// NoSweep turns off the background sweep of expired op records on the
	// stores that have one (memory, SQLite, PostgreSQL; docs/sweep.md), for
	// a deployment where one separate process sweeps.
	NoSweep bool
}

// Open opens the store spec names and returns it with a function that
// releases what it holds. Errors name the kind of store, never the value
// (a URL may carry credentials).
func Open(ctx context.Context, spec string) (idem.Store, func(), error) {
	return OpenWith(ctx, spec, Options{})
}

// OpenWith is [Open] with o.
func OpenWith(ctx context.Context, spec string, o Options) (idem.Store, func(), error) {
	scheme, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, nil, fmt.Errorf("a store value begins with its kind: want one of %s", Usage)
	}
	switch scheme {
	case "memory":
		s := memory.New(&memory.Options{NoSweep: o.NoSweep})
		return s, func() { s.Close() }, nil
	case "sqlite":
		if rest == "" {
			return nil, nil, errors.New("store sqlite: want sqlite:PATH")
		}
		s, err := sqlite.Open(rest, &sqlite.Options{NoSweep: o.NoSweep})
		if err != nil {
			return nil, nil, fmt.Errorf("opening %s: %w", rest, err)
		}
		return s, func() { s.Close() }, nil
	case "postgres", "postgresql":
		return openPostgres(ctx, spec, o)
	case "dynamodb":
		return openDynamo(ctx, spec)
	case "firestore":
		return openFirestore(ctx, spec)
	}
	return nil, nil, fmt.Errorf("store kind %q: want one of %s", scheme, Usage)
}

func openPostgres(ctx context.Context, spec string, o Options) (idem.Store, func(), error) {
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
	s, err := postgres.New(pool, &postgres.Options{TablePrefix: prefix, NoSweep: o.NoSweep})
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

func openDynamo(ctx context.Context, spec string) (idem.Store, func(), error) {
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" {
		return nil, nil, errors.New("store dynamodb: want dynamodb://TABLE?endpoint=URL&region=R")
	}
	q := u.Query()
	region := q.Get("region")
	if region == "" {
		region = "us-east-1"
	}
	var client *dynamodb.Client
	if ep := q.Get("endpoint"); ep != "" {
		client = localDynamo(ep, region)
	} else {
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
		if err != nil {
			return nil, nil, fmt.Errorf("store dynamodb: %w", err)
		}
		client = dynamodb.NewFromConfig(cfg)
	}
	s, err := dynamo.New(client, u.Host, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("store dynamodb: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.CreateTable(cctx); err != nil {
		return nil, nil, fmt.Errorf("store dynamodb: %w", err)
	}
	return s, func() {}, nil
}

// localDynamo returns a client of a DynamoDB endpoint such as DynamoDB
// Local, with the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
// or dummy ones (DynamoDB Local takes any).
func localDynamo(endpoint, region string) *dynamodb.Client {
	creds := aws.Credentials{AccessKeyID: "dummy", SecretAccessKey: "dummy", Source: "storeurl"}
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		creds = aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local sends no X-Amz-Crc32 on errors.
		o.DisableValidateResponseChecksum = true
	})
}

func openFirestore(ctx context.Context, spec string) (idem.Store, func(), error) {
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" {
		return nil, nil, errors.New("store firestore: want firestore://PROJECT?emulator=HOST:PORT&prefix=P")
	}
	q := u.Query()
	if em := q.Get("emulator"); em != "" {
		// The client finds the emulator through this variable.
		os.Setenv("FIRESTORE_EMULATOR_HOST", em)
	}
	client, err := firestore.NewClient(ctx, u.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("store firestore: %w", err)
	}
	prefix := q.Get("prefix")
	s, err := idemfs.New(client, &idemfs.Options{CollectionPrefix: prefix, OwnerCollection: prefix + "users"})
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("store firestore: %w", err)
	}
	return s, func() { client.Close() }, nil
}
