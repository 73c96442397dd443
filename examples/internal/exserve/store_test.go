package exserve

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	"github.com/idemkit/sdk/internal/storeurl/storeurltest"
)

// This package's tests must not import internal/storeurl, which links every
// kind of store: they check what the example servers' own builds link.

// A store this build links opens through -store; one it leaves out is
// refused by Parse, before anything is opened, with the build tag that
// links it and without the value. A default build links memory and SQLite;
// scripts/lib/suite.sh runs this test again under -tags allstores, where
// every kind opens.
func TestStoreKinds(t *testing.T) {
	for _, name := range storeurltest.Names {
		t.Run(name, func(t *testing.T) {
			if !storekind.Linked(name) {
				tag := name // each kind's tag is its name
				schemes := []string{name}
				if name == "postgres" {
					schemes = append(schemes, "postgresql")
				}
				for _, scheme := range schemes {
					_, _, err := parse("-store", scheme+"://user:sekrit@127.0.0.1:1/x")
					if err == nil {
						t.Fatalf("%s: a kind this build leaves out passed Parse", scheme)
					}
					msg := err.Error()
					for _, want := range []string{"-tags " + tag, "allstores", "go run -tags " + tag + " ./examples/ex -store " + scheme + "://..."} {
						if !strings.Contains(msg, want) {
							t.Errorf("%s: the refusal lacks %q: %s", scheme, want, msg)
						}
					}
					if strings.Contains(msg, "sekrit") {
						t.Errorf("%s: the refusal repeats the value: %s", scheme, msg)
					}
				}
				return
			}
			f, _, err := parse("-store", storeurltest.Fresh(t, name))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, done, err := f.OpenStore(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), "ex")
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			key := idem.Key{Collection: "things", ID: "a"}
			if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				return tx.Create(ctx, key, map[string]int{"n": 1})
			}); err != nil {
				t.Fatal(err)
			}
			var got map[string]int
			if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				_, err := tx.Get(ctx, key, &got)
				return err
			}); err != nil || got["n"] != 1 {
				t.Fatalf("read back %v, %v", got, err)
			}
		})
	}
}

// -h names the kinds this build opens and the tags of the others.
func TestStoreHelp(t *testing.T) {
	_, out, _ := parse("-h")
	if !strings.Contains(out, "memory: | sqlite:PATH") {
		t.Errorf("-h lacks the embedded stores:\n%s", out)
	}
	for _, tag := range []string{"postgres", "dynamodb", "firestore"} {
		if !storekind.Linked(tag) && !strings.Contains(out, tag) {
			t.Errorf("-h does not name the tag %s:\n%s", tag, out)
		}
	}
}

// The examples' programs link a store's client library only under its tag:
// their default build has none of pgx, the AWS SDK, Google's Firestore
// client or gRPC, so the README's first go run downloads none of them.
func TestBuildTagsLinkTheirStores(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	libs := map[string]string{"postgres": "github.com/jackc/pgx/", "dynamodb": "github.com/aws/aws-sdk-go-v2/", "firestore": "cloud.google.com/go/firestore"}
	for _, tags := range []string{"", "postgres", "dynamodb", "firestore", "allstores"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, goCmd, "list", "-deps", "-tags="+tags, "-f", "{{.ImportPath}}", "github.com/idemkit/sdk/examples/...").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("go list -tags=%s: %v\n%s", tags, err, out)
		}
		deps := string(out)
		if !strings.Contains(deps, "modernc.org/sqlite\n") {
			t.Fatalf("-tags=%s: the examples do not link SQLite:\n%s", tags, deps)
		}
		for tag, lib := range libs {
			want := tags == tag || tags == "allstores"
			if got := strings.Contains(deps, "\n"+lib); got != want {
				t.Errorf("-tags=%s: the examples link %s: %v, want %v", tags, lib, got, want)
			}
		}
		if got, want := strings.Contains(deps, "\ngoogle.golang.org/grpc\n"), tags == "firestore" || tags == "allstores"; got != want {
			t.Errorf("-tags=%s: the examples link gRPC: %v, want %v", tags, got, want)
		}
	}
}
