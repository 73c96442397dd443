package exserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// page is what the save tool of storedBytesServer answers: the id of the
// note it wrote and a long text.
type page struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// storedBytesServer is a server on the SQLite store s, its Guard built with
// opts, with one tool, save, that takes an op id (whose answer is then
// kept for the TTL) and whose handler writes a small note and answers a
// page with a text of size characters.
func storedBytesServer(s idem.Store, opts idem.Options, size int) *mcp.Server {
	text := strings.Repeat("x", size)
	guard := idem.New(s, &opts)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "save", Description: "Write a note and answer a long page."}, guard,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, page, error) {
			return nil, page{ID: in.ID, Text: text}, tx.Put(ctx, idem.Key{Collection: "notes", ID: in.ID}, in)
		}, idem.RequireOpID())
	return srv
}

// toolAnswer is the JSON-RPC answer to one tools/call.
type toolAnswer struct {
	Result struct {
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// code is the answer's _meta["io.idemkit/error"], "" for none.
func (a *toolAnswer) code() string {
	c, _ := a.Result.Meta[idem.MetaError].(string)
	return c
}

// text is the answer's text content.
func (a *toolAnswer) text() string {
	var b strings.Builder
	for _, c := range a.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// decodeAnswer reads the answer of a streamable HTTP request, sent as JSON
// or as an event stream with one message.
func decodeAnswer(body []byte) (*toolAnswer, error) {
	msg := bytes.TrimSpace(body)
	if !bytes.HasPrefix(msg, []byte("{")) {
		var data []byte
		for line := range bytes.Lines(body) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimSpace(d)...)
			}
		}
		msg = data
	}
	var a toolAnswer
	if err := json.Unmarshal(msg, &a); err != nil {
		return nil, fmt.Errorf("decoding %.200q: %w", msg, err)
	}
	if a.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error: %s", a.Error.Message)
	}
	return &a, nil
}

// saveCall is the JSON-RPC text of save with note id and text, under the
// op id op-ID.
func saveCall(id, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"save","arguments":{"id":%q,"text":%q,"op_id":"op-%s"}}}`, id, text, id)
}

// save sends saveCall(id, text) as token's user and returns the answer;
// anything but a 200 fails t.
func save(t *testing.T, url, token, id, text string) *toolAnswer {
	t.Helper()
	code, body, err := post(testClient, url, token, "2025-06-18", saveCall(id, text))
	if err != nil || code != 200 {
		t.Fatalf("save %s as %s: %d %v %.200s", id, token, code, err, body)
	}
	a, err := decodeAnswer(body)
	if err != nil {
		t.Fatalf("save %s as %s: %v", id, token, err)
	}
	return a
}

// A fill is what filling a store gave: the calls of user a answered, the
// first refused (-1 for none) and its answer, and the bytes of the
// SQLite file once the store is closed (which checkpoints its log).
type fill struct {
	answered, refusedAt int
	refusal             *toolAnswer
	fileBytes           int64
}

// fillStore serves storedBytesServer(opts, size) on a fresh SQLite file
// over HTTP and sends it calls saves of user a, one after another, each
// with a note id and an op id of its own. Once a call is refused quota_exceeded, every
// later call of a's must be refused too, the refused call's note must not
// be stored, and user b must still be answered.
func fillStore(t *testing.T, opts idem.Options, size, calls int) fill {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stored.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	url := startServer(t, storedBytesServer(s, opts, size), DefaultLimits())
	f := fill{refusedAt: -1}
	for i := range calls {
		a := save(t, url, "tok-a", fmt.Sprintf("a-%d", i), fmt.Sprintf("note-%d", i))
		switch {
		case !a.Result.IsError && f.refusedAt < 0:
			f.answered++
		case a.Result.IsError && a.code() == string(idem.CodeQuotaExceeded):
			if f.refusedAt < 0 {
				f.refusedAt, f.refusal = i, a
			}
		default:
			t.Fatalf("a's call %d, after %d answered and a refusal at %d: isError %v, code %q: %.200s",
				i, f.answered, f.refusedAt, a.Result.IsError, a.code(), a.text())
		}
	}
	if f.refusedAt >= 0 {
		id := fmt.Sprintf("a-%d", f.refusedAt)
		err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, idem.Key{Collection: "notes", ID: id}, &Note{})
			return err
		})
		if !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("the refused call's note %s: %v, want not stored", id, err)
		}
	}
	if b := save(t, url, "tok-b", "b-0", "note-b"); b.Result.IsError {
		t.Errorf("b is refused once a has filled the store: %q %.200s", b.code(), b.text())
	}
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			f.fileBytes += fi.Size()
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	return f
}

// TestMaxStoredBytesFillsThenRefuses is the measurement docs/production.md
// quotes: one user sends 300 saves, one after another, each answering
// about 400 KB, to a server on SQLite under the default -max-stored-bytes
// (64 MiB) and -ttl. The saves are answered until the user's answers reach
// the bound, about 64 MiB / 400 KB of them; each later one is refused
// quota_exceeded with when to retry, quoting no argument, and stores
// nothing; another user is still answered; and the SQLite file stays under
// the bound plus a tenth. With no bound, all 300 are answered and the file
// holds them all.
//
// That measurement takes 20 s, and minutes under -race: it runs with
// IDEMKIT_STORED_BYTES_FULL=1, as in
//
//	IDEMKIT_STORED_BYTES_FULL=1 go test -run TestMaxStoredBytesFillsThenRefuses -v ./examples/internal/exserve
//
// Without it the answers and the bound are a tenth of those (40 KB and
// 6.4 MiB), which keeps the counts.
func TestMaxStoredBytesFillsThenRefuses(t *testing.T) {
	const calls = 300
	f, _, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	opts := idem.Options{TTL: f.TTL, MaxStoredBytes: f.MaxStoredBytes}
	size := 400_000
	if os.Getenv("IDEMKIT_STORED_BYTES_FULL") == "" {
		size /= 10
		opts.MaxStoredBytes /= 10
	}
	// What one answer keeps: its structured content, as JSON (a note id
	// of a-NNN), and the handler's result, none ("null").
	one, err := json.Marshal(page{ID: "a-100", Text: strings.Repeat("x", size)})
	if err != nil {
		t.Fatal(err)
	}
	kept := int64(len(one) + len("null"))
	want := int(opts.MaxStoredBytes / kept)

	bound := fillStore(t, opts, size, calls)
	t.Logf("bound of %d bytes: %d of %d saves of %d bytes answered, then quota_exceeded; SQLite file %.1f MB",
		opts.MaxStoredBytes, bound.answered, calls, kept, float64(bound.fileBytes)/1e6)
	if bound.answered < want-1 || bound.answered > want+1 || bound.refusedAt != bound.answered {
		t.Errorf("%d saves answered, the first refused at %d; want %d (±1) answered, then refused", bound.answered, bound.refusedAt, want)
	}
	if bound.refusal != nil {
		msg := bound.refusal.text()
		t.Logf("the refusal: %s", msg)
		if !strings.Contains(msg, "retry in ") {
			t.Errorf("the refusal %q does not say when to retry", msg)
		}
		if id := fmt.Sprint(bound.refusedAt); strings.Contains(msg, "a-"+id) || strings.Contains(msg, "note-"+id) || strings.Contains(msg, "op-a-"+id) {
			t.Errorf("the refusal %q quotes the call's arguments", msg)
		}
	}
	if limit := opts.MaxStoredBytes + opts.MaxStoredBytes/10; bound.fileBytes >= limit {
		t.Errorf("the SQLite file holds %d bytes, want under %d (the bound and a tenth)", bound.fileBytes, limit)
	}

	opts.MaxStoredBytes = 0
	open := fillStore(t, opts, size, calls)
	t.Logf("no bound: %d of %d saves answered; SQLite file %.1f MB", open.answered, calls, float64(open.fileBytes)/1e6)
	if open.answered != calls || open.fileBytes < int64(calls)*kept {
		t.Errorf("no bound: %d saves answered, file of %d bytes; want all %d, and at least %d bytes", open.answered, open.fileBytes, calls, int64(calls)*kept)
	}
}
