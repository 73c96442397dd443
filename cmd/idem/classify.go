package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/idemkit/sdk/idem"
)

// A class says whether a client may send a tool's call again after a lost
// answer, as the tool's annotations and inputs tell it (docs/protect.md).
type class string

const (
	classReadOnly      class = "read_only"
	classIdempotent    class = "idempotent_write"
	classNonIdempotent class = "non_idempotent_write"
	classUnknown       class = "unknown"
	classConflicting   class = "conflicting"
)

// words is how a class reads in the table.
func (c class) words() string {
	return map[class]string{
		classReadOnly:      "read-only",
		classIdempotent:    "idempotent write",
		classNonIdempotent: "non-idempotent write",
		classUnknown:       "unknown",
		classConflicting:   "conflicting",
	}[c]
}

// Severities of a finding: a problem fails the audit, a warning only with
// -strict, information never.
const (
	problem = "problem"
	warning = "warning"
	info    = "info"
)

// A finding is one thing the audit says of a tool.
type finding struct {
	Tool     string `json:"tool"`
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// A toolReport is the audit of one tool.
type toolReport struct {
	Name  string `json:"name"`
	Class class  `json:"class"`
	// Annotations holds the three hints the rules read, where the tool
	// gives them as booleans.
	Annotations map[string]bool `json:"annotations"`
	// OpID is "required", "optional" or "" (the tool takes no op id).
	OpID     string    `json:"op_id,omitempty"`
	Keys     []string  `json:"keys,omitempty"`
	Findings []finding `json:"findings"`
}

// rawTool is a tool as tools/list sends it, before any client reads it
// into types that lose what the audit looks at (a hint that is absent
// rather than false, a boolean subschema).
type rawTool struct {
	Name         string                     `json:"name"`
	Description  string                     `json:"description"`
	InputSchema  json.RawMessage            `json:"inputSchema"`
	OutputSchema json.RawMessage            `json:"outputSchema"`
	Annotations  map[string]json.RawMessage `json:"annotations"`
	Meta         map[string]json.RawMessage `json:"_meta"`
}

// forApps reports whether the tool's _meta declares it for app callers
// (idem.ForApps: "io.idemkit/callers": "apps").
func forApps(t rawTool) bool {
	var callers string
	return json.Unmarshal(t.Meta[idem.MetaCallers], &callers) == nil && callers == "apps"
}

const (
	hintReadOnly    = "readOnlyHint"
	hintDestructive = "destructiveHint"
	hintIdempotent  = "idempotentHint"
)

var (
	// opIDWords is how a property's description says it is an op id.
	opIDWords = regexp.MustCompile(`(?i)\bop[ _-]?id\b|\bidempotency[ _-]?key\b`)
	// keyWord is how a property's description says it is a record key.
	keyWord = regexp.MustCompile(`(?i)\bkeys?\b`)
	// repeatWords is how a tool's description speaks of repeats: keys, op
	// ids, idempotency, retries.
	repeatWords = regexp.MustCompile(`(?i)\bkeys?\b|\bop[ _-]?ids?\b|idempoten|\bretr(y|ies|ied)\b|\brepeats?\b`)
)

// isOpIDName reports whether a property name says op id: op_id, opId,
// op-id, idempotency_key, idempotencyKey.
func isOpIDName(name string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name))
	return n == "opid" || n == "idempotencykey"
}

// hasHint reports whether t gives hint h as a boolean.
func hasHint(t rawTool, h string) bool {
	var v bool
	raw, ok := t.Annotations[h]
	return ok && json.Unmarshal(raw, &v) == nil
}

// classify audits one tool.
func classify(t rawTool) toolReport {
	r := toolReport{Name: t.Name, Annotations: map[string]bool{}, Findings: []finding{}}
	for _, h := range []string{hintReadOnly, hintDestructive, hintIdempotent} {
		raw, ok := t.Annotations[h]
		if !ok {
			continue
		}
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			r.add(problem, "bad_annotation", fmt.Sprintf("%s is not a boolean; clients read it as absent", h))
			continue
		}
		r.Annotations[h] = v
	}
	input, inputErr := schemaObject(t.InputSchema, "inputSchema", true)
	r.OpID, r.Keys = inputsOf(input)

	ro, dst, idm := r.Annotations[hintReadOnly], r.Annotations[hintDestructive], r.Annotations[hintIdempotent]
	switch {
	case ro && dst:
		r.Class = classConflicting
		r.add(problem, "read_only_destructive", "says readOnlyHint and destructiveHint: a client cannot tell whether a repeat is harmless (Claude Code resends it on readOnlyHint; Qwen Code does not)")
	case !ro && idm && r.OpID == "optional" && len(r.Keys) == 0:
		r.Class = classConflicting
		r.add(problem, "optional_op_id", "says idempotentHint, but its op id is optional and it has no record key: a call without an op id (what a model sends) writes again when a client resends it; require the op id or name a record key")
	case ro:
		r.Class = classReadOnly
	case idm:
		r.Class = classIdempotent
	case len(r.Annotations) == 0:
		r.Class = classUnknown
		r.add(problem, "no_hints", "has no readOnlyHint, idempotentHint or destructiveHint: clients treat it as a write that is unsafe to resend, so a lost answer is an unknown outcome; say readOnlyHint, or make it idempotent (a record key or a required op id) and say idempotentHint")
	case hasHint(t, hintIdempotent):
		r.Class = classNonIdempotent
		r.add(info, "not_idempotent", "says idempotentHint: false, so clients do not resend it and a lost answer is an unknown outcome; that is honest for a write a repeat may do twice, and a record key or a required op id would let clients resend it")
	default:
		r.Class = classNonIdempotent
		r.add(problem, "no_idempotent_hint", "is a write that does not say idempotentHint: clients take it as false; say false if a repeat may write twice, or make it idempotent (a record key or a required op id) and say true")
	}
	switch opIDOnly := !ro && r.OpID == "required" && len(r.Keys) == 0; {
	case opIDOnly && forApps(t):
		r.add(info, "op_id_only_for_apps", "is declared for apps (_meta io.idemkit/callers): its only protection is a required op id, safe for an app that mints it once and resends it; "+
			"a model that calls it anyway and lost the answer may call again under a new op id, so its description must send models to a keyed tool")
	case opIDOnly:
		r.add(warning, "op_id_only", "is a write whose only protection is a required op id: safe for an app that mints it once and resends it, "+
			"but a model that lost the answer calls again under a new op id and the write lands twice; add a record key the model already has "+
			"(a date and device, a slug, an id from an earlier answer) and write create-if-absent or replace-by-key on it; or, for a tool meant for apps, declare it (idem.ForApps) and give models a keyed tool beside it")
	}
	if !ro && !repeatWords.MatchString(t.Description) {
		r.add(warning, "description_silent", "is a write whose description says nothing of record keys, op ids or retries: a model cannot tell which argument makes a repeat harmless")
	}

	if inputErr != "" {
		r.add(problem, "schema_root", inputErr)
	} else {
		r.addBooleanSubschemas(input, "inputSchema")
	}
	if len(bytes.TrimSpace(t.OutputSchema)) > 0 && string(bytes.TrimSpace(t.OutputSchema)) != "null" {
		output, outputErr := schemaObject(t.OutputSchema, "outputSchema", false)
		if outputErr != "" {
			r.add(problem, "schema_root", outputErr)
		} else {
			r.addBooleanSubschemas(output, "outputSchema")
		}
	}
	return r
}

func (r *toolReport) add(severity, code, message string) {
	r.Findings = append(r.Findings, finding{Tool: r.Name, Severity: severity, Code: code, Message: message})
}

func (r *toolReport) addBooleanSubschemas(schema map[string]any, at string) {
	for _, path := range booleanSubschemas(schema, at) {
		r.add(problem, "boolean_subschema", fmt.Sprintf("has a boolean subschema at %s: Gemini CLI and the TypeScript SDK v1 reject the whole tools/list, hiding every tool of the server (write {} for true; leave the property out for false)", path))
	}
}

// schemaObject reads a tool's schema; the message, if not "", says why a
// strict client rejects it.
func schemaObject(raw json.RawMessage, name string, required bool) (map[string]any, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if required {
			return nil, fmt.Sprintf("has no %s (MCP requires one: {\"type\": \"object\"} at least)", name)
		}
		return nil, ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, fmt.Sprintf("has an %s that is not valid JSON", name)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("has an %s that is not a JSON object", name)
	}
	if m["type"] != "object" {
		return m, fmt.Sprintf("has an %s whose root does not say \"type\": \"object\" (MCP requires it; strict clients reject the tool)", name)
	}
	return m, ""
}

// inputsOf reads, from a tool's input schema, whether it takes an op id
// ("required", "optional" or "") and which properties are record keys: the
// required properties, other than the op id, named key or described as a
// key.
func inputsOf(schema map[string]any) (opID string, keys []string) {
	props, _ := schema["properties"].(map[string]any)
	var required []string
	if list, ok := schema["required"].([]any); ok {
		for _, v := range list {
			if s, ok := v.(string); ok {
				required = append(required, s)
			}
		}
	}
	for name, p := range props {
		desc := ""
		if pm, ok := p.(map[string]any); ok {
			desc, _ = pm["description"].(string)
		}
		isRequired := slices.Contains(required, name)
		switch {
		case isOpIDName(name) || opIDWords.MatchString(desc):
			if isRequired {
				opID = "required"
			} else if opID == "" {
				opID = "optional"
			}
		case isRequired && (strings.EqualFold(name, "key") || keyWord.MatchString(desc)):
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return opID, keys
}

// Keywords whose values are schemas, maps of schemas and arrays of
// schemas, as in idem/schema.go.
var (
	schemaKeywords      = []string{"additionalProperties", "unevaluatedProperties", "items", "additionalItems", "unevaluatedItems", "contains", "not", "if", "then", "else", "propertyNames"}
	schemaMapKeywords   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	// booleanKeywords may hold a boolean: clients meet additionalProperties:
	// false every day.
	booleanKeywords = []string{"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
)

// booleanSubschemas returns the paths, below at, of the boolean subschemas
// of schema that strict clients reject, in a stable order.
func booleanSubschemas(schema map[string]any, at string) []string {
	var found []string
	visit := func(v any, path string, mayBeBool bool) {
		switch x := v.(type) {
		case bool:
			if !mayBeBool {
				found = append(found, path)
			}
		case map[string]any:
			found = append(found, booleanSubschemas(x, path)...)
		}
	}
	for _, k := range schemaKeywords {
		if v, ok := schema[k]; ok {
			if _, isList := v.([]any); !isList {
				visit(v, at+"."+k, slices.Contains(booleanKeywords, k))
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if m, ok := schema[k].(map[string]any); ok {
			names := make([]string, 0, len(m))
			for name := range m {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				visit(m[name], at+"."+k+"."+name, false)
			}
		}
	}
	for _, k := range schemaArrayKeywords {
		if list, ok := schema[k].([]any); ok {
			for i, v := range list {
				visit(v, at+"."+k+"["+strconv.Itoa(i)+"]", false)
			}
		}
	}
	return found
}
