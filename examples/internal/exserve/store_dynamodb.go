//go:build dynamodb || allstores

package exserve

// DynamoDB, for -store dynamodb://... (the AWS SDK): linked only under this tag or allstores (store.go).
import _ "github.com/idemkit/sdk/internal/storeurl/dynamourl"
