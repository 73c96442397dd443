package exserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxNameLen is the longest JSON-RPC method, and the longest name in a
// message's params (a tool's in tools/call, a prompt's in prompts/get),
// passed on to the MCP server (the MCP specification asks tool names to be
// at most 128 characters): a longer one is refused before the server sees
// it, since the go-sdk's error would quote it whole.
const maxNameLen = 128

// maxErrorText is the longest error message, and error data, passed on from
// the MCP server.
const maxErrorText = 256

// message is what the serving layer reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// inspection is what the serving layer reads of a request body, decoded
// once.
type inspection struct {
	n      int             // JSON-RPC messages: a batch's length, or 1 for anything else
	method string          // for one message, its method
	id     json.RawMessage // for one message, its id
	refuse string          // the reason to refuse the body before the MCP server sees it, if any
}

// inspect reads body. A body that does not parse is one message, which the
// MCP server answers.
func inspect(body []byte) inspection {
	body = bytes.TrimLeft(body, " \t\r\n")
	batch := len(body) > 0 && body[0] == '['
	var msgs []message
	var err error
	if batch {
		err = json.Unmarshal(body, &msgs)
	} else {
		msgs = make([]message, 1)
		err = json.Unmarshal(body, &msgs[0])
	}
	// A member of the wrong type leaves the others decoded.
	if typeErr := (*json.UnmarshalTypeError)(nil); err != nil && !errors.As(err, &typeErr) {
		return inspection{n: 1}
	}
	in := inspection{n: len(msgs)}
	if !batch {
		in.method, in.id = msgs[0].Method, msgs[0].ID
	}
	for _, m := range msgs {
		switch {
		case len(m.Method) > maxNameLen:
			in.refuse = reasonMethodTooLong
		case len(m.Params.Name) > maxNameLen:
			in.refuse = reasonNameTooLong
		}
	}
	return in
}

// wireError is a JSON-RPC error object.
type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// wireErrorResponse is a JSON-RPC response carrying an error.
type wireErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"` // null when the request had none
	Error   wireError       `json:"error"`
}

// refuseMessage answers 400 with a JSON-RPC error of code and a fixed text,
// for the request of id (none for a batch or a notification).
func refuseMessage(w http.ResponseWriter, id json.RawMessage, code int64, text string) {
	b, err := json.Marshal(wireErrorResponse{JSONRPC: "2.0", ID: id, Error: wireError{Code: code, Message: text}})
	if err != nil { // an id that is not JSON: the request has none
		b, _ = json.Marshal(wireErrorResponse{JSONRPC: "2.0", Error: wireError{Code: code, Message: text}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
}

// quoteless passes on the MCP server's answer to a request with its error
// texts made unable to carry the request's bytes: in each JSON-RPC error,
// the text in double quotes (where the go-sdk quotes what a request sent:
// an unknown tool or method, params it could not decode) is elided, the
// message is cut to maxErrorText bytes, and data longer than that is
// dropped; a plain-text HTTP error gets the same. Answers in JSON and plain
// text are held until the handler returns; an event stream goes out a line
// at a time, each flush passed on.
type quoteless struct {
	w      http.ResponseWriter
	kind   answerKind
	status int
	buf    []byte
}

type answerKind int

const (
	undecided answerKind = iota
	passed               // written as it comes
	streamed             // an event stream, read a line at a time
	held                 // JSON, read whole at the end
	heldText             // a plain-text error, read whole at the end
)

func (q *quoteless) Header() http.Header { return q.w.Header() }

// Unwrap lets http.ResponseController reach the connection.
func (q *quoteless) Unwrap() http.ResponseWriter { return q.w }

func (q *quoteless) WriteHeader(code int) {
	if q.kind != undecided {
		return
	}
	ct := q.w.Header().Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		q.kind = streamed
	case strings.HasPrefix(ct, "application/json"):
		q.kind = held
	case code >= 400 && strings.HasPrefix(ct, "text/plain"):
		q.kind = heldText
	default:
		q.kind = passed
	}
	if q.kind == held || q.kind == heldText {
		q.status = code
		q.w.Header().Del("Content-Length")
		return
	}
	q.w.WriteHeader(code)
}

func (q *quoteless) Write(p []byte) (int, error) {
	if q.kind == undecided {
		q.WriteHeader(http.StatusOK)
	}
	switch q.kind {
	case passed:
		return q.w.Write(p)
	case streamed:
		q.buf = append(q.buf, p...)
		if err := q.writeLines(); err != nil {
			return 0, err
		}
	default:
		q.buf = append(q.buf, p...)
	}
	return len(p), nil
}

func (q *quoteless) Flush() {
	if q.kind == held || q.kind == heldText {
		return
	}
	if q.kind == streamed && q.writeLines() != nil {
		return
	}
	if f, ok := q.w.(http.Flusher); ok {
		f.Flush()
	}
}

// writeLines writes the stream's complete lines.
func (q *quoteless) writeLines() error {
	end := bytes.LastIndexByte(q.buf, '\n') + 1
	if end == 0 {
		return nil
	}
	var out []byte
	for line := range bytes.Lines(q.buf[:end]) {
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			out = append(out, "data:"...)
			out = append(out, elideJSONRPC(data)...)
		} else {
			out = append(out, line...)
		}
	}
	q.buf = append(q.buf[:0], q.buf[end:]...)
	_, err := q.w.Write(out)
	return err
}

// finish writes what is held, once the handler has returned.
func (q *quoteless) finish() {
	switch q.kind {
	case streamed:
		if len(q.buf) > 0 {
			q.buf = append(q.buf, '\n')
			q.writeLines()
		}
	case held:
		q.w.WriteHeader(q.status)
		q.w.Write(elideJSONRPC(q.buf))
	case heldText:
		q.w.WriteHeader(q.status)
		q.w.Write([]byte(elideText(strings.TrimSuffix(string(q.buf), "\n")) + "\n"))
	}
}

// elideJSONRPC returns b, a JSON-RPC message or batch, with the texts of
// its errors elided; b itself when it holds no error.
func elideJSONRPC(b []byte) []byte {
	if !bytes.Contains(b, []byte(`"error"`)) {
		return b
	}
	lead := b[:len(b)-len(bytes.TrimLeft(b, " \t\r\n"))]
	trail := b[len(bytes.TrimRight(b, " \t\r\n")):]
	body := bytes.TrimSpace(b)
	var out []byte
	if len(body) > 0 && body[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(body, &batch) != nil {
			return b
		}
		changed := false
		for i, m := range batch {
			if e, ok := elideResponse(m); ok {
				batch[i], changed = e, true
			}
		}
		if !changed {
			return b
		}
		out, _ = json.Marshal(batch)
	} else {
		e, ok := elideResponse(body)
		if !ok {
			return b
		}
		out = e
	}
	return append(append(append([]byte{}, lead...), out...), trail...)
}

// elideResponse returns m, a JSON-RPC message, with the text of its error
// elided, and whether it had one to elide.
func elideResponse(m json.RawMessage) (json.RawMessage, bool) {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
		Error   *wireError      `json:"error"`
	}
	if json.Unmarshal(m, &r) != nil || r.Error == nil || r.Method != nil {
		return nil, false
	}
	text, data := elideText(r.Error.Message), r.Error.Data
	if len(data) > maxErrorText {
		data = nil
	}
	if text == r.Error.Message && len(data) == len(r.Error.Data) {
		return nil, false
	}
	out, err := json.Marshal(wireErrorResponse{JSONRPC: r.JSONRPC, ID: r.ID, Error: wireError{Code: r.Error.Code, Message: text, Data: data}})
	return out, err == nil
}

// elideText returns s with the text between each pair of double quotes
// replaced by "…" (a quote inside is escaped, as Go's %q writes it; an
// unclosed quote runs to the end), cut to maxErrorText bytes.
func elideText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] != '"' {
			continue
		}
		b.WriteString(`…"`)
		for i++; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' {
				i++
			}
		}
	}
	out := b.String()
	if len(out) > maxErrorText {
		cut := maxErrorText - len("…")
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
	}
	return out
}
