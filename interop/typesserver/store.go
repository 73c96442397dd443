package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/dynamo"
	idemfs "github.com/idemkit/sdk/store/firestore"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/sqlite"
)

// storeFlags says which store the server runs on: SQLite when db is set,
// DynamoDB when dynamoURL is, Firestore when firestoreHost is, memory
// otherwise.
type storeFlags struct {
	db        string
	dynamoURL string
	table     string
	// firestoreHost is a Firestore emulator's host:port; prefix keeps this
	// server's collections apart from other servers' on it.
	firestoreHost string
	prefix        string
}

// open returns the store f names and a function that closes it. On
// DynamoDB it creates the table first (a table that exists is kept, so
// stdio processes started one after the other share one with -table).
func (f storeFlags) open(ctx context.Context) (idem.Store, func(), error) {
	switch n := btoi(f.db != "") + btoi(f.dynamoURL != "") + btoi(f.firestoreHost != ""); {
	case n > 1:
		return nil, nil, fmt.Errorf("-db, -dynamodb and -firestore exclude each other")
	case f.firestoreHost != "":
		// The client finds the emulator through this variable.
		os.Setenv("FIRESTORE_EMULATOR_HOST", f.firestoreHost)
		client, err := firestore.NewClient(ctx, "idemkit-interop")
		if err != nil {
			return nil, nil, err
		}
		s, err := idemfs.New(client, &idemfs.Options{CollectionPrefix: f.prefix, OwnerCollection: f.prefix + "users"})
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return s, func() { client.Close() }, nil
	case f.db != "":
		s, err := sqlite.Open(f.db, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("opening %s: %w", f.db, err)
		}
		return s, func() { s.Close() }, nil
	case f.dynamoURL != "":
		table := f.table
		if table == "" {
			table = fmt.Sprintf("idemkit_types_%d_%d", os.Getpid(), time.Now().UnixNano())
		}
		s, err := dynamo.New(dynamoClient(f.dynamoURL), table, nil)
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := s.CreateTable(ctx); err != nil {
			return nil, nil, err
		}
		return s, func() {}, nil
	}
	return memory.New(nil), func() {}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dynamoClient returns a DynamoDB client of the endpoint url in us-east-1,
// with the credentials in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, or dummy ones when they are unset (DynamoDB Local
// takes any).
func dynamoClient(url string) *dynamodb.Client {
	creds := aws.Credentials{AccessKeyID: "dummy", SecretAccessKey: "dummy", Source: "typesserver"}
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		creds = aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}
	}
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		// DynamoDB Local sends no X-Amz-Crc32 on errors.
		o.DisableValidateResponseChecksum = true
	})
}
