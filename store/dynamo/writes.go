package dynamo

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Writes is a transaction's handle for items of your own (in your own
// tables): what you Add goes out in the transaction's one TransactWriteItems,
// after the store's items, with the conditions you give, and commits or fails
// with them. Get it with As:
//
//	var w *dynamo.Writes
//	if tx.As(&w) {
//		err := w.Add(types.TransactWriteItem{Put: &types.Put{
//			TableName:           aws.String("orders"),
//			Item:                order,
//			ConditionExpression: aws.String("attribute_not_exists(id)"),
//		}})
//	}
//
// Read your items with Client (use ConsistentRead): such reads are not
// checked at commit, so put what they decided into a condition of your own.
// A condition of yours that fails makes Run call fn once more and then fail
// with [ErrConditionFailed]. A Writes is valid only while fn runs.
type Writes struct{ t *tx }

// Add appends items to the transaction. Each item names its table; an item
// may not be one of the store's own (the same key twice in one transaction
// is refused by DynamoDB). It fails after Run has returned.
func (w *Writes) Add(items ...types.TransactWriteItem) error {
	if err := w.t.Err(); err != nil {
		return err
	}
	for _, it := range items {
		if it.Put == nil && it.Update == nil && it.Delete == nil && it.ConditionCheck == nil {
			return errors.New("dynamo: Writes.Add: an item sets none of Put, Update, Delete, ConditionCheck")
		}
	}
	w.t.own = append(w.t.own, items...)
	return nil
}

// Client returns the store's client, for reading items of your own.
func (w *Writes) Client() *dynamodb.Client { return w.t.s.client }

// ownBytes estimates the size an added item counts toward the 4 MB limit.
func ownBytes(it types.TransactWriteItem) int {
	switch {
	case it.Put != nil:
		return itemBytes(it.Put.Item)
	case it.Update != nil:
		return itemBytes(it.Update.Key) + itemBytes(it.Update.ExpressionAttributeValues)
	case it.Delete != nil:
		return itemBytes(it.Delete.Key)
	case it.ConditionCheck != nil:
		return itemBytes(it.ConditionCheck.Key)
	}
	return 0
}
