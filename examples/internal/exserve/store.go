package exserve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemkit/sdk/internal/storeurl/storekind"
)

// The example servers link the embedded stores, SQLite and memory, and no
// other unless a build tag asks for it, so that their first go run
// downloads and compiles no cloud SDK: -tags postgres links PostgreSQL
// (pgx), -tags dynamodb DynamoDB (the AWS SDK), -tags firestore Firestore
// (Google's client and gRPC), and -tags allstores all three (the files
// store_postgres.go, store_dynamodb.go and store_firestore.go). Tags
// combine: -tags postgres,dynamodb.
//
// taggedKinds are those kinds, each with the build tag that links it.
var taggedKinds = []struct{ scheme, name, tag string }{
	{"postgres", "PostgreSQL", "postgres"},
	{"postgresql", "PostgreSQL", "postgres"},
	{"dynamodb", "DynamoDB", "dynamodb"},
	{"firestore", "Firestore", "firestore"},
}

// checkLinked refuses a -store value of a kind this build of the command
// cmd leaves out, naming the build tag that links it. The error never
// repeats the value.
func checkLinked(cmd, spec string) error {
	scheme, _, _ := strings.Cut(spec, ":")
	for _, k := range taggedKinds {
		if k.scheme == scheme && !storekind.Linked(scheme) {
			return fmt.Errorf("-store: %s is not in this build, which links the embedded stores only (memory:, sqlite:PATH): build with -tags %s (or -tags allstores), as in: go run -tags %s ./examples/%s -store %s://...",
				k.name, k.tag, k.tag, cmd, scheme)
		}
	}
	return nil
}

// storeUsage is the help text of -store: the kinds this build opens, and
// the tags that link the others.
func storeUsage() string {
	u := "the store: " + storekind.Usage()
	var names, tags []string
	for _, k := range taggedKinds {
		if !storekind.Linked(k.scheme) && !slices.Contains(tags, k.tag) {
			names, tags = append(names, k.name), append(tags, k.tag)
		}
	}
	if len(tags) > 0 {
		u += "; for " + strings.Join(names, ", ") + " build with -tags " + strings.Join(tags, ", ") + " (or allstores; docs/production.md)"
	}
	return u
}
