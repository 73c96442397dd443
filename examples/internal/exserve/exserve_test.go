package exserve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A -user value needs a token and an id, and a refusal does not repeat it.
func TestUsersSet(t *testing.T) {
	u := Users{}
	for _, bad := range []string{"", "sekrit", "=alice", "sekrit="} {
		err := u.Set(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if bad != "" && strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%q: error repeats the token: %v", bad, err)
		}
	}
	if err := u.Set("tok=alice"); err != nil || u["tok"] != "alice" {
		t.Fatalf("Set(tok=alice): %v, %v", err, u)
	}
}

// With users, the endpoint refuses a request without a known token; other
// paths answer 404 naming the endpoint.
func TestHandlerNeedsAToken(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	hs := httptest.NewServer(Handler(srv, Users{"tok": "alice"}))
	defer hs.Close()
	for _, tok := range []string{"", "wrong"} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+Path, strings.NewReader(`{}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
	}
	resp, err := http.Get(hs.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /: %d, want 404", resp.StatusCode)
	}
}
