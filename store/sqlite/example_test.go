package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	k := idem.Key{Collection: "posts", ID: "p1"}
	create := func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, map[string]string{"title": "Hello"})
	}
	fmt.Println(s.Run(ctx, create))
	fmt.Println(s.Run(ctx, create))
	// Output:
	// <nil>
	// idem: document already exists
}
