package dynamo_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/sdk/store/dynamo"
)

// A negative option is refused at construction, naming the field; zero
// means the default. New does not touch DynamoDB.
func TestNegativeOptions(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	for name, opts := range map[string]*dynamo.Options{
		"MaxDocumentBytes": {MaxDocumentBytes: -1},
		"MaxAttempts":      {MaxAttempts: -1},
	} {
		if _, err := dynamo.New(c, "docs", opts); err == nil || !strings.Contains(err.Error(), "Options."+name+" may not be negative") {
			t.Errorf("New with a negative %s: %v, want an error naming it", name, err)
		}
	}
	if _, err := dynamo.New(c, "docs", &dynamo.Options{}); err != nil {
		t.Errorf("New with zero options: %v", err)
	}
}
