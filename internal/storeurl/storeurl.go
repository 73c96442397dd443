// Package storeurl opens the store a command-line value names, of every
// kind, for the commands that serve or check any store (idem canary, the
// crash tests' server) and for tests:
//
//	memory:                                     in memory, gone at exit
//	sqlite:PATH                                 SQLite file at PATH
//	postgres://USER@HOST:PORT/DB?...            PostgreSQL (pgx pool); table_prefix=P keeps stores apart
//	dynamodb://TABLE?endpoint=URL&region=R      DynamoDB table TABLE, created if missing
//	firestore://PROJECT?emulator=HOST:PORT&prefix=P  Firestore (the emulator when given)
//
// The store's own tables are created when missing (Migrate, CreateTable).
// Importing it links every store's client library (pgx, the AWS SDK,
// Google's Firestore client); a program that wants the embedded stores
// alone, as the example servers do by default, opens values with package
// storekind and imports only the kinds it wants (postgresurl, dynamourl,
// firestoreurl).
package storeurl

import (
	"context"

	"github.com/idemkit/sdk/idem"
	_ "github.com/idemkit/sdk/internal/storeurl/dynamourl"
	_ "github.com/idemkit/sdk/internal/storeurl/firestoreurl"
	_ "github.com/idemkit/sdk/internal/storeurl/postgresurl"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
)

// Usage is the grammar of a store value, for a flag's help text.
const Usage = "memory: | sqlite:PATH | postgres://... | dynamodb://TABLE?endpoint=URL | firestore://PROJECT?emulator=HOST:PORT"

// Options change how [OpenWith] opens a store.
type Options = storekind.Options

// Open opens the store spec names and returns it with a function that
// releases what it holds. Errors name the kind of store, never the value
// (a URL may carry credentials).
func Open(ctx context.Context, spec string) (idem.Store, func(), error) {
	return OpenWith(ctx, spec, Options{})
}

// OpenWith is [Open] with o.
func OpenWith(ctx context.Context, spec string, o Options) (idem.Store, func(), error) {
	return storekind.Open(ctx, spec, o)
}
