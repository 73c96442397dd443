// Package dynamourl links DynamoDB into package storekind: a program that
// imports it opens
//
//	dynamodb://TABLE?endpoint=URL&region=R
//
// as the table TABLE, created when missing, in region R (default
// us-east-1), at endpoint URL when given (DynamoDB Local), or at AWS with
// the default credentials otherwise.
package dynamourl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	"github.com/idemkit/sdk/store/dynamo"
)

func init() {
	storekind.Register(storekind.Kind{Schemes: []string{"dynamodb"}, Usage: "dynamodb://TABLE?endpoint=URL", Open: open})
}

func open(ctx context.Context, spec string, _ storekind.Options) (idem.Store, func(), error) {
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
