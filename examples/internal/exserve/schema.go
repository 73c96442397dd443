package exserve

import "github.com/google/jsonschema-go/jsonschema"

// InputSchema is the input schema inferred from T's fields, its
// properties (by argument name) changed by edit: an example states there
// the limits its arguments' descriptions give, so that a client reads
// them and the Guard refuses a value outside them (invalid_arguments)
// before the handler runs. It panics when T has no schema, as a tool
// declared at start-up does.
func InputSchema[T any](edit func(map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	edit(s.Properties)
	return s
}
