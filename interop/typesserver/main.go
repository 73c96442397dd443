// Command typesserver is an MCP server for the interop tests whose tool
// inputs and outputs hold the types a hand-written schema gets wrong: any,
// maps, pointers and nested structs.
//
//	typesserver -stdio                      # stdio
//	typesserver -http 127.0.0.1:8081        # streamable HTTP, stateful (the SDK's default)
//	typesserver -http 127.0.0.1:8081 -stateless
//	typesserver -stdio -db types.db         # on SQLite
//	typesserver -stdio -dynamodb http://127.0.0.1:8765 -table types
//	typesserver -stdio -firestore 127.0.0.1:8282 -prefix t1_
//
// The store is memory by default, SQLite with -db, DynamoDB at the endpoint
// -dynamodb names (region us-east-1), in the table -table (default a fresh
// name per process), created at start if missing, and Firestore on the
// emulator -firestore names, in collections whose names begin with -prefix.
//
// -stateless serves the streamable HTTP handler with
// StreamableHTTPOptions.Stateless set: the configuration under which
// clients that speak protocol 2026-07-28 (server/discover, no initialize)
// can call tools over HTTP.
//
// Its tools:
//   - put_doc replaces a document keyed by doc_id.
//   - append_entry appends an entry under a server-made sequence number and
//     takes an op id.
//   - get_operation, for lost responses.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// Address is a nested struct behind a pointer.
type Address struct {
	City   string  `json:"city"`
	Street *string `json:"street,omitempty"`
}

// Person is a nested struct with a pointer to another.
type Person struct {
	Name    string   `json:"name"`
	Address *Address `json:"address,omitempty"`
}

// Doc is the input and output of put_doc.
type Doc struct {
	DocID  string            `json:"doc_id" jsonschema:"the document's id"`
	Body   map[string]any    `json:"body,omitempty" jsonschema:"any JSON object"`
	Extra  any               `json:"extra,omitempty" jsonschema:"any JSON value"`
	Labels map[string]string `json:"labels,omitempty"`
	Owner  *Person           `json:"owner,omitempty"`
	Rank   *int              `json:"rank,omitempty"`
}

// Entry is the input of append_entry.
type Entry struct {
	Payload any            `json:"payload" jsonschema:"any JSON value"`
	Attrs   map[string]any `json:"attrs,omitempty"`
	Author  *Person        `json:"author,omitempty"`
	Weight  *float64       `json:"weight,omitempty"`
}

// Appended is the answer of append_entry.
type Appended struct {
	Seq   int64  `json:"seq"`
	Entry Entry  `json:"entry"`
	Prev  *int64 `json:"prev,omitempty"`
}

type counter struct {
	N int64 `json:"n"`
}

var counterKey = idem.Key{Collection: "counters", ID: "entries"}

func putDoc(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Doc) (*mcp.CallToolResult, Doc, error) {
	return nil, in, tx.Put(ctx, idem.Key{Collection: "docs", ID: in.DocID}, in)
}

func appendEntry(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Entry) (*mcp.CallToolResult, Appended, error) {
	var c counter
	v, err := tx.Get(ctx, counterKey, &c)
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		return nil, Appended{}, err
	}
	out := Appended{Entry: in}
	if v != 0 {
		prev := c.N
		out.Prev = &prev
	}
	c.N++
	out.Seq = c.N
	if v == 0 {
		err = tx.Create(ctx, counterKey, c)
	} else {
		err = tx.Update(ctx, counterKey, v, c)
	}
	return nil, out, err
}

// newServer returns the types server on store s.
func newServer(s idem.Store) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-interop-types", Version: "v0.1.0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "put_doc", Description: "Replace a document."}, s, putDoc, idem.RecordKeys("doc_id"))
	idem.AddTool(srv, &mcp.Tool{Name: "append_entry", Description: "Append an entry and return its sequence number."}, s, appendEntry, idem.OpID())
	idem.RegisterStatusTool(srv, s)
	return srv
}

func main() {
	var sf storeFlags
	flag.StringVar(&sf.db, "db", "", "SQLite database file (default: in memory)")
	flag.StringVar(&sf.dynamoURL, "dynamodb", "", "run on DynamoDB at this endpoint URL (default: in memory)")
	flag.StringVar(&sf.table, "table", "", "the DynamoDB table, created if missing (default: a fresh name)")
	flag.StringVar(&sf.firestoreHost, "firestore", "", "run on the Firestore emulator at this host:port (default: in memory)")
	flag.StringVar(&sf.prefix, "prefix", "", "with -firestore: put in front of this server's collection names")
	addr := flag.String("http", "127.0.0.1:8081", "serve streamable HTTP on this address")
	stdio := flag.Bool("stdio", false, "serve on stdin/stdout instead of HTTP")
	stateless := flag.Bool("stateless", false, "serve streamable HTTP without sessions")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, closeStore, err := sf.open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer closeStore()
	srv := newServer(s)

	if *stdio {
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: *stateless})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	log.Printf("typesserver: MCP over streamable HTTP at http://%s/ (stateless %v)", ln.Addr(), *stateless)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
