package storekind_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
	"github.com/idemkit/sdk/store/memory"
)

// A program that imports no kind's package opens memory and SQLite only,
// and refuses the other kinds without repeating the value. (This test
// binary imports none of them.)
func TestEmbeddedKindsOnly(t *testing.T) {
	ctx := context.Background()
	for _, spec := range []string{"memory:", "sqlite:" + t.TempDir() + "/k.db"} {
		s, done, err := storekind.Open(ctx, spec, storekind.Options{NoSweep: true})
		if err != nil || s == nil {
			t.Fatalf("%s: %v", spec, err)
		}
		done()
	}
	for _, spec := range []string{"postgres://u:sekrit@127.0.0.1/db", "postgresql://u:sekrit@127.0.0.1/db", "dynamodb://t?endpoint=http://127.0.0.1:1", "firestore://p?emulator=127.0.0.1:1", "sqlite:", "nothing"} {
		_, _, err := storekind.Open(ctx, spec, storekind.Options{})
		if err == nil {
			t.Errorf("%s opened", spec)
		} else if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: the error repeats the password: %v", spec, err)
		}
	}
	for scheme, want := range map[string]bool{"memory": true, "sqlite": true, "postgres": false, "dynamodb": false, "firestore": false} {
		if got := storekind.Linked(scheme); got != want {
			t.Errorf("Linked(%s) = %v, want %v", scheme, got, want)
		}
	}
	u := storekind.Usage()
	if !strings.HasPrefix(u, "memory: | sqlite:PATH") || strings.Contains(u, "postgres") || strings.Contains(u, "dynamodb") || strings.Contains(u, "firestore") {
		t.Errorf("Usage() = %q, want memory and SQLite alone", u)
	}
}

// A registered kind opens the values of each of its schemes, with the
// options given, and joins the usage.
func TestRegister(t *testing.T) {
	type call struct {
		spec    string
		noSweep bool
	}
	var calls []call
	storekind.Register(storekind.Kind{Schemes: []string{"test", "test2"}, Usage: "test://X", Open: func(_ context.Context, spec string, o storekind.Options) (idem.Store, func(), error) {
		calls = append(calls, call{spec, o.NoSweep})
		s := memory.New(&memory.Options{NoSweep: true})
		return s, func() { s.Close() }, nil
	}})
	if !storekind.Linked("test") || !storekind.Linked("test2") {
		t.Fatal("a registered kind is not linked")
	}
	if u := storekind.Usage(); !strings.HasSuffix(u, " | test://X") {
		t.Errorf("Usage() = %q, want the registered kind's grammar last", u)
	}
	for _, c := range []call{{"test://a", true}, {"test2:b", false}} {
		_, done, err := storekind.Open(context.Background(), c.spec, storekind.Options{NoSweep: c.noSweep})
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		done()
	}
	if want := []call{{"test://a", true}, {"test2:b", false}}; len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] {
		t.Fatalf("the opener got %v, want %v", calls, want)
	}
}
