package interop_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/sdk/internal/testenv"
)

// dynamoURL returns the test DynamoDB's URL from IDEMKIT_DYNAMODB_URL
// (scripts/with-dynamodb.sh sets it). Without one the test is skipped,
// except in CI, where a missing DynamoDB fails the run.
func dynamoURL(t *testing.T) string {
	t.Helper()
	return testenv.Service(t, "IDEMKIT_DYNAMODB_URL", "scripts/with-dynamodb.sh")
}

var dynamoTables atomic.Int64

// TestTypesOnDynamoDB runs the types server's scenarios with each client
// over each transport, on store/dynamo: a table per client and transport,
// shared by the stdio server processes of its sessions, deleted at the end.
func TestTypesOnDynamoDB(t *testing.T) {
	url := dynamoURL(t)
	db := dynamoClient(url)
	runMatrix(t, bins.types, typesPlan(), typesChecks, func(t *testing.T) []string {
		table := fmt.Sprintf("idemkit_interop_%d_%d", os.Getpid(), dynamoTables.Add(1))
		// Registered before the server starts, so run after it stops.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// A server that failed before CreateTable left no table.
			_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		return []string{"-dynamodb", url, "-table", table, "-stateless"}
	})
}

// dynamoClient returns a DynamoDB client of the endpoint url in us-east-1
// with the server's credentials (typesserver's dynamoClient): those in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or dummy
// ones when they are unset. DynamoDB Local keeps a database per access key,
// so a table a server made is deleted with the same key.
func dynamoClient(url string) *dynamodb.Client {
	creds := aws.Credentials{AccessKeyID: "dummy", SecretAccessKey: "dummy", Source: "test"}
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		creds = aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}
	}
	return dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
	}, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		// DynamoDB Local sends no X-Amz-Crc32 on errors.
		o.DisableValidateResponseChecksum = true
	})
}
