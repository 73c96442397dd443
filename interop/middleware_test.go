package interop_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fs "cloud.google.com/go/firestore"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo/mcpgotest"
	"github.com/idemkit/sdk/store/dynamo"
	idemfs "github.com/idemkit/sdk/store/firestore"
	"github.com/idemkit/sdk/store/storetest"
)

// The conformance suite's middleware cases through the mcp-go adapter on
// DynamoDB and Firestore, whose modules this one already requires;
// idem/mcpgo runs them on memory, SQLite and PostgreSQL.

var mwTables atomic.Int64

// TestMCPGoMiddlewareOnDynamoDB: a table of its own per store, with no TTL
// (the cases drive the store's clock; DynamoDB's TTL goes by the real one).
func TestMCPGoMiddlewareOnDynamoDB(t *testing.T) {
	db := dynamoClient(dynamoURL(t))
	mcpgotest.RunMiddleware(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			table := fmt.Sprintf("idemkit_mcpgo_%d_%d", os.Getpid(), mwTables.Add(1))
			s, err := dynamo.New(db, table, &dynamo.Options{Now: now})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			_, err = db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
				TableName:            aws.String(table),
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
				BillingMode:          types.BillingModePayPerRequest,
			})
			if err != nil {
				t.Fatalf("creating table %s: %v", table, err)
			}
			t.Cleanup(func() {
				if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
					t.Errorf("deleting table %s: %v", table, err)
				}
			})
			return s
		},
		Reader: true,
	})
}

var (
	mwFirestoreOnce   sync.Once
	mwFirestore       *fs.Client
	mwFirestoreErr    error
	mwFirestoreStores atomic.Int64
)

// TestMCPGoMiddlewareOnFirestore: collections of their own per store, in a
// project of this process's own, cleared at the end. The cases that contend
// on one document run 8 goroutines, as the store's own conformance run does
// on the emulator.
func TestMCPGoMiddlewareOnFirestore(t *testing.T) {
	host := firestoreHost(t)
	project := fmt.Sprintf("idemkit-mcpgo-%d", os.Getpid())
	mwFirestoreOnce.Do(func() {
		os.Setenv("FIRESTORE_EMULATOR_HOST", host)
		mwFirestore, mwFirestoreErr = fs.NewClient(context.Background(), project)
	})
	if mwFirestoreErr != nil {
		t.Fatalf("NewClient: %v", mwFirestoreErr)
	}
	t.Cleanup(func() {
		req, err := http.NewRequest(http.MethodDelete, "http://"+host+"/emulator/v1/projects/"+project+"/databases/(default)/documents", nil)
		if err != nil {
			t.Error(err)
			return
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("clearing the emulator: %v", err)
			return
		}
		res.Body.Close()
	})
	mcpgotest.RunMiddleware(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			n := mwFirestoreStores.Add(1)
			s, err := idemfs.New(mwFirestore, &idemfs.Options{Now: now, CollectionPrefix: fmt.Sprintf("t%d_", n),
				OwnerCollection: fmt.Sprintf("t%d_users", n)})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		Concurrency: 8,
		Reader:      true,
	})
}
