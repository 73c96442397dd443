package idem

import (
	"encoding/json"

	"github.com/idemkit/sdk/internal/argsfp"
)

// opIDArgument is the name of the tool argument that carries an op id.
const opIDArgument = "op_id"

// fingerprintArgs returns the fingerprint of args, a JSON object of tool
// arguments as the caller sent them: the hex SHA-256 of the object less its
// top-level op_id, as encoding/json writes it (package internal/argsfp says
// it exactly; idemclient reports the same). Two objects that differ only
// in member order or white space have one fingerprint. The error for
// malformed input never holds the input.
func fingerprintArgs(args json.RawMessage) (string, error) { return argsfp.Of(args) }
