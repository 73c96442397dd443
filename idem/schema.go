package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// publishable returns s as the JSON object a tools/list sends, with every
// boolean subschema a strict client would reject rewritten: true (what
// jsonschema-go writes for a field of type any) becomes {}, which means the
// same. A false subschema cannot be rewritten as an object every client
// reads the same way, so it is refused, except where the JSON Schema
// vocabulary commonly holds a boolean (additionalProperties and its kin).
func publishable(s *jsonschema.Schema) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep numbers (limits, defaults, enums) as written
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the schema is not a JSON object")
	}
	if err := normalizeSchema(m, ""); err != nil {
		return nil, err
	}
	return m, nil
}

// Keywords whose values are schemas, maps of schemas, and arrays of schemas.
var (
	schemaKeywords = []string{"additionalProperties", "unevaluatedProperties", "items", "additionalItems",
		"unevaluatedItems", "contains", "not", "if", "then", "else", "propertyNames"}
	schemaMapKeywords   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	// booleanKeywords may hold false: a client meets it there every day.
	booleanKeywords = []string{"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
)

// normalizeSchema rewrites the subschemas of the schema object m in place;
// at names where m sits, for errors.
func normalizeSchema(m map[string]any, at string) error {
	sub := func(v any, where string, mayBeFalse bool) (any, error) {
		switch x := v.(type) {
		case bool:
			if x {
				return map[string]any{}, nil
			}
			if mayBeFalse {
				return false, nil
			}
			return nil, fmt.Errorf("%s is the false schema, which strict clients reject; leave the property out instead", where)
		case map[string]any:
			return x, normalizeSchema(x, where)
		}
		return v, nil
	}
	var err error
	for _, k := range schemaKeywords {
		if v, ok := m[k]; ok {
			if m[k], err = sub(v, at+"/"+k, slices.Contains(booleanKeywords, k)); err != nil {
				return err
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if props, ok := m[k].(map[string]any); ok {
			for name, v := range props {
				if props[name], err = sub(v, at+"/"+k+"/"+name, false); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range schemaArrayKeywords {
		if list, ok := m[k].([]any); ok {
			for i, v := range list {
				if list[i], err = sub(v, fmt.Sprintf("%s/%s/%d", at, k, i), false); err != nil {
					return err
				}
			}
		}
	}
	if list, ok := m["items"].([]any); ok { // draft-07 tuple items
		for i, v := range list {
			if list[i], err = sub(v, fmt.Sprintf("%s/items/%d", at, i), false); err != nil {
				return err
			}
		}
	}
	return nil
}

// inputCheck validates a call's arguments against the tool's input schema
// and applies its defaults, with refusals that name the argument and what
// was expected, never the value (jsonschema-go's own messages quote it).
type inputCheck struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	props    map[string]*jsonschema.Resolved // each top-level property alone, where it resolves alone
	closed   bool                            // additionalProperties: false
	defaults bool                            // some subschema has a default to apply
	fast     *fastSchema                     // nil: every call takes the full validator
}

func newInputCheck(s *jsonschema.Schema) (*inputCheck, error) {
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, err
	}
	ic := &inputCheck{schema: s, resolved: r, props: make(map[string]*jsonschema.Resolved)}
	for name, p := range s.Properties {
		if pr, err := p.CloneSchemas().Resolve(nil); err == nil {
			ic.props[name] = pr
		}
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Not != nil && isEmptySchema(ap.Not) {
		ic.closed = true
	}
	// A property named "default" makes defaults be applied too; that is all.
	b, err := json.Marshal(s)
	ic.defaults = err != nil || bytes.Contains(b, []byte(`"default"`))
	if !ic.defaults {
		ic.fast = newFastSchema(s)
	}
	return ic, nil
}

func isEmptySchema(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && string(b) == "true"
}

// check returns the arguments with the schema's defaults applied, or a
// refusal. Absent or null arguments are the empty object. object says the
// arguments are a valid JSON object (parseArgs), which the fast check needs.
func (ic *inputCheck) check(args json.RawMessage, object bool) (json.RawMessage, *Error) {
	if ic.fast != nil {
		switch {
		case object && len(args) > 0 && args[0] == '{' && ic.fast.fastValid(args):
			return args, nil // what the full validator accepts, as sent
		case !object && absentArgs(args) && ic.fast.fastValid([]byte("{}")):
			return json.RawMessage("{}"), nil // as checkFull answers absent arguments
		}
	}
	return ic.checkFull(args)
}

// absentArgs reports whether args are absent or null, which count as {}.
// (White space alone is checked as {} but is not JSON: its decoding fails.)
func absentArgs(args json.RawMessage) bool {
	return len(args) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null"))
}

// checkFull is check with jsonschema-go's validator, for every call the fast
// check (fastpath.go) is not sure of.
func (ic *inputCheck) checkFull(args json.RawMessage) (json.RawMessage, *Error) {
	m := map[string]any{}
	if trimmed := bytes.TrimSpace(args); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if trimmed[0] != '{' {
			return nil, newError(CodeInvalidArguments, "the arguments must be a JSON object")
		}
		if json.Unmarshal(trimmed, &m) != nil {
			return nil, newError(CodeInvalidArguments, "the arguments cannot be read: they are not valid JSON, or hold a number beyond a double's range")
		}
	}
	var v any = m
	if ic.defaults {
		if err := ic.resolved.ApplyDefaults(&v); err != nil {
			return nil, newError(CodeInvalidArguments, "the arguments do not match the tool's input schema")
		}
	}
	if err := ic.resolved.Validate(v); err != nil {
		return nil, newError(CodeInvalidArguments, ic.explain(m))
	}
	if !ic.defaults && !absentArgs(args) {
		return args, nil // nothing was added: the arguments as sent
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, newError(CodeInvalidArguments, "the arguments cannot be encoded")
	}
	return b, nil
}

// explain says what is wrong with arguments m that failed validation, naming
// arguments by the schema's property names only.
func (ic *inputCheck) explain(m map[string]any) string {
	for _, name := range ic.schema.Required {
		if _, ok := m[name]; !ok {
			return fmt.Sprintf("argument %q is required", name)
		}
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p, known := ic.schema.Properties[name]
		if !known {
			if ic.closed {
				accepted := make([]string, 0, len(ic.schema.Properties))
				for k := range ic.schema.Properties {
					accepted = append(accepted, k)
				}
				slices.Sort(accepted)
				return "the arguments hold a property this tool does not accept; it accepts " + strings.Join(quoteAll(accepted), ", ")
			}
			continue
		}
		if r := ic.props[name]; r != nil && r.Validate(m[name]) != nil {
			return fmt.Sprintf("argument %q does not match its schema: want %s", name, expected(p))
		}
	}
	return "the arguments do not match the tool's input schema"
}

// expected describes in a few words the values schema p accepts.
func expected(p *jsonschema.Schema) string {
	var what string
	switch {
	case p.Type != "":
		what = map[string]string{"integer": "an integer", "number": "a number", "string": "a string",
			"boolean": "a boolean", "array": "an array", "object": "an object", "null": "null"}[p.Type]
		if what == "" {
			what = p.Type
		}
	case len(p.Types) > 0:
		what = "one of the types " + strings.Join(p.Types, ", ")
	case len(p.Enum) > 0:
		return "one of the values the schema lists"
	default:
		return "a value the schema accepts"
	}
	if len(p.Enum) > 0 || p.Pattern != "" || p.Minimum != nil || p.Maximum != nil || p.ExclusiveMinimum != nil ||
		p.ExclusiveMaximum != nil || p.MinLength != nil || p.MaxLength != nil || p.Format != "" ||
		len(p.Properties) > 0 || p.Items != nil || p.MinItems != nil || p.MaxItems != nil {
		what += " within the limits its schema gives"
	}
	return what
}

// wholeNumbersAsIntegers returns args with every number that has a whole
// value of at most 2^53 in magnitude written as an integer (1.0 and 1e2 as 1
// and 100), and whether it changed any: JSON Schema's "integer" takes them,
// and a Go integer field then can too.
func wholeNumbersAsIntegers(args json.RawMessage) (json.RawMessage, bool) {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case json.Number:
			if !strings.ContainsAny(string(x), ".eE") {
				return x
			}
			f, err := x.Float64()
			if err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
				changed = true
				return json.Number(strconv.FormatInt(int64(f), 10))
			}
		}
		return v
	}
	v = walk(v)
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(v)
	return b, err == nil
}
