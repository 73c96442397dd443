// Package firestoreurl links Firestore into package storekind: a program
// that imports it opens
//
//	firestore://PROJECT?emulator=HOST:PORT&prefix=P
//
// as the project PROJECT's Firestore, or the emulator at HOST:PORT when
// given, in collections whose names begin with P.
package firestoreurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"

	"cloud.google.com/go/firestore"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	idemfs "github.com/idemkit/sdk/store/firestore"
)

func init() {
	storekind.Register(storekind.Kind{Schemes: []string{"firestore"}, Usage: "firestore://PROJECT?emulator=HOST:PORT", Open: open})
}

func open(ctx context.Context, spec string, _ storekind.Options) (idem.Store, func(), error) {
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" {
		return nil, nil, errors.New("store firestore: want firestore://PROJECT?emulator=HOST:PORT&prefix=P")
	}
	q := u.Query()
	if em := q.Get("emulator"); em != "" {
		// The client finds the emulator through this variable.
		os.Setenv("FIRESTORE_EMULATOR_HOST", em)
	}
	client, err := firestore.NewClient(ctx, u.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("store firestore: %w", err)
	}
	prefix := q.Get("prefix")
	s, err := idemfs.New(client, &idemfs.Options{CollectionPrefix: prefix, OwnerCollection: prefix + "users"})
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("store firestore: %w", err)
	}
	return s, func() { client.Close() }, nil
}
