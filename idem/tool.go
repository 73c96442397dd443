package idem

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// newTool wraps h for tool def: the published definition, the input schema
// calls are checked against, and the state calls share.
func newTool(def adapter.ToolDef, c *config, s Store, h adapter.Handler, decode func(json.RawMessage) (any, error)) (*tool, error) {
	if err := checkClaims(def, c); err != nil {
		return nil, err
	}
	pub := def
	pub.Idempotent = def.Idempotent || def.ReadOnly || (c.onlyArg == "" && (len(c.keys) > 0 || c.requireOpID))
	schema, err := inputSchema(h.In, def.InputSchema)
	if err != nil {
		return nil, err
	}
	if err := addKeysAndOpID(schema, c); err != nil {
		return nil, err
	}
	// Calls are checked against the schema less a required op_id: an op id
	// may come in _meta instead, and its presence is checked apart
	// (invalid_op_id), before the arguments.
	checked := *schema
	checked.Required = slices.DeleteFunc(slices.Clone(schema.Required), func(r string) bool { return r == opIDArgument })
	in, err := newInputCheck(&checked)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if pub.InputSchema, err = publishable(schema); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	out := outputOf(h.Out)
	if pub.OutputSchema, err = publishOutput(def, c, h, &out); err != nil {
		return nil, err
	}
	if notes := retryNotes(c, def, pub.Idempotent); len(notes) > 0 {
		pub.Description = strings.TrimSpace(pub.Description + "\n\n" + strings.Join(notes, "\n"))
	}
	if c.forApps {
		pub.Description = "For apps, not models. " + pub.Description
		pub.Meta = maps.Clone(pub.Meta)
		if pub.Meta == nil {
			pub.Meta = map[string]any{}
		}
		pub.Meta[MetaCallers] = "apps"
	}
	return &tool{
		def: pub, c: c, s: s, h: h, readResult: decode, in: in, out: out,
		fl: &flights{m: make(map[Key]chan struct{})}, recent: newRecentOps(recentOpsSize),
	}, nil
}

// checkClaims refuses options given values they cannot use, and
// annotations that contradict each other or the options.
func checkClaims(def adapter.ToolDef, c *config) error {
	switch {
	case c.err != nil:
		return c.err
	case def.ReadOnly && def.Destructive:
		return fmt.Errorf("annotations claim both read-only and destructive")
	case def.Idempotent && c.opID && !c.requireOpID && len(c.keys) == 0:
		return fmt.Errorf("annotations claim idempotent, but the op id is optional and there are no keys: a call without one is not safe to repeat (use RecordKeys or RequireOpID, or drop the claim)")
	case c.onlyArg != "" && !c.outside:
		return fmt.Errorf("OnlyWhen is for tools a Guard guards (Guard.Middleware)")
	}
	return nil
}

// addKeysAndOpID marks the record keys in schema, the published input
// schema, and adds op_id to it: what each is, and which are required.
func addKeysAndOpID(schema *jsonschema.Schema, c *config) error {
	keyNote := " Record key: names the record this call writes; a repeat with the same value writes the same record."
	if c.outside {
		keyNote = " Record key: a repeat with the same record keys is answered with the first call's answer."
	}
	for _, k := range c.keys {
		p, ok := schema.Properties[k]
		if !ok {
			return fmt.Errorf("key %q is not an input property", k)
		}
		p = p.CloneSchemas()
		// The property's own description is a phrase as often as a
		// sentence: end it before the sentence that follows.
		d := strings.TrimSpace(p.Description)
		if d != "" && !strings.HasSuffix(d, ".") {
			d += "."
		}
		p.Description = strings.TrimSpace(d + keyNote)
		schema.Properties[k] = p
	}
	// op_id is in required exactly when the tool requires it, whatever In
	// says (an In with its own op_id field without omitempty would make it
	// required, and a model would then invent one).
	schema.Required = slices.DeleteFunc(slices.Clone(schema.Required), func(r string) bool {
		return slices.Contains(c.keys, r) || r == opIDArgument
	})
	if c.onlyArg == "" { // with OnlyWhen, only guarded calls need them
		schema.Required = append(schema.Required, c.keys...)
	}
	if !c.opID {
		return nil
	}
	if c.requireOpID && c.onlyArg == "" {
		schema.Required = append(schema.Required, opIDArgument)
	}
	p := &jsonschema.Schema{Type: "string", MinLength: new(1), MaxLength: new(maxOpIDLen), Pattern: "^[!-~]+$"}
	if own, ok := schema.Properties[opIDArgument]; ok {
		p = own.CloneSchemas()
	}
	p.Description = opIDPropertyNote[c.requireOpID]
	schema.Properties[opIDArgument] = p
	return nil
}

// publishOutput returns the output schema to publish, nil for none, and
// sets out's check: the handler's output is checked against the schema
// published for it, as the go-sdk checks its own typed tools' (a guarded
// tool's output is the server's, checked there).
func publishOutput(def adapter.ToolDef, c *config, h adapter.Handler, out *output) (any, error) {
	if def.OutputSchema == nil && out.isInterface {
		return nil, nil
	}
	os, err := outputSchema(h.Out, def.OutputSchema)
	if err != nil {
		return nil, err
	}
	pub, err := publishable(os)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	if os.Type == "object" && !c.outside {
		if out.check, err = newInputCheck(os); err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
	}
	return pub, nil
}

// retryNotes returns what the description tells a model about retrying
// the tool after an error or a lost answer, the one text every client shows
// its model: which arguments to keep the same, and that a fresh op id is a
// new operation. A model that lost an answer regenerates what it minted; the
// notes say which values must not be regenerated.
func retryNotes(c *config, def adapter.ToolDef, idempotent bool) []string {
	var notes []string
	switch {
	case len(c.keys) > 0 && c.outside:
		keys := joinAnd(quoteAll(c.keys))
		notes = append(notes, fmt.Sprintf("Safe to retry with the same arguments%s: a repeat with the same %s within %s is answered with the first call's answer and does nothing again, so an identical call meant as a new one in that time also gets the first answer; change %s to make a new one.",
			c.onlyWhenPhrase(), keys, humanDuration(c.ttl), keys))
	case len(c.keys) > 0:
		notes = append(notes, fmt.Sprintf("Safe to retry with the same %s: %s the record, so a repeat writes it again instead of adding one.",
			joinAnd(quoteAll(c.keys)), map[bool]string{true: "it names", false: "they name"}[len(c.keys) == 1]))
	case c.requireOpID, def.ReadOnly:
	case idempotent:
		notes = append(notes, "Safe to retry: a repeat of the same arguments has no further effect.")
	default:
		notes = append(notes, notRepeatableNote)
	}
	if c.opID {
		note := "op_id " + map[bool]string{false: opIDOptionalNote, true: opIDRequiredNote}[c.requireOpID]
		if c.requireOpID && c.onlyArg != "" {
			note = "op_id (required" + c.onlyWhenPhrase() + ")" + strings.TrimPrefix(opIDRequiredNote, "(required)")
		}
		notes = append(notes, note)
	}
	return notes
}

// opIDPropertyNote is the op_id property's description: what the value
// is, in a line. How to retry with it is said once, in the tool's
// description (retryNotes), which a model reads beside the schema.
var opIDPropertyNote = map[bool]string{
	false: "An id an app minted for this operation before its first attempt. Leave it out unless your client minted it; never invent one.",
	true:  "An id for this one operation (a UUID), chosen before its first attempt and resent unchanged on every retry: 1..128 printable ASCII characters.",
}

const (
	opIDOptionalNote  = "(optional) is for apps replaying queued requests: the app mints one per operation before the first attempt and resends it unchanged on every retry, and a repeat returns the first result. Leave it out unless your client minted it; never invent one."
	opIDRequiredNote  = "(required): an id for this one operation (a UUID), chosen before its first attempt. To retry after an error or a lost answer, resend the same op_id, or first ask get_operation (if listed) whether it committed; never send a new op_id for a retry: a new op_id is a new operation, done again. 1..128 printable ASCII characters."
	notRepeatableNote = "A repeat may act again: after an error or a lost answer, check whether the call took effect before sending it again."
)

// humanDuration writes d for a sentence: "24 hours", "90 minutes", "1m30s".
func humanDuration(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "an hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}

// joinAnd joins "a", "b" and "c" as a list in a sentence.
func joinAnd(ss []string) string {
	if len(ss) < 2 {
		return strings.Join(ss, "")
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " and " + ss[len(ss)-1]
}

// inputSchema returns a copy of the author's input schema, or the one
// inferred from rt, the handler's In, that newTool may edit.
func inputSchema(rt reflect.Type, own any) (*jsonschema.Schema, error) {
	var s *jsonschema.Schema
	switch {
	case own == nil && rt == reflect.TypeFor[any]():
		s = &jsonschema.Schema{Type: "object"}
	case own == nil:
		inferred, err := jsonschema.ForType(rt, nil)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		s = inferred
	default:
		var err error
		if s, err = schemaOf(own); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
	}
	if s.Type != "object" {
		return nil, fmt.Errorf(`input schema must have type "object"`)
	}
	s.Properties = maps.Clone(s.Properties)
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	return s, nil
}

// outputSchema returns the author's output schema, or the one inferred from
// rt, the handler's Out (for a pointer, from its element type).
func outputSchema(rt reflect.Type, own any) (*jsonschema.Schema, error) {
	if own != nil {
		s, err := schemaOf(own)
		if err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
		return s, nil
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	s, err := jsonschema.ForType(rt, nil)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	return s, nil
}

// schemaOf returns a copy of a schema in any form the SDK accepts
// (*jsonschema.Schema, json.RawMessage, a map), leaving the caller's value
// alone.
func schemaOf(v any) (*jsonschema.Schema, error) {
	if s, ok := v.(*jsonschema.Schema); ok && s != nil {
		return s.CloneSchemas(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
