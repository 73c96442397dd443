// Package importcheck holds a test that keeps the module's library packages
// free of test machinery: a program that imports every public package that
// is not a test helper must not depend on package testing or on
// pgregory.net/rapid, and must not gain their command-line flags. Its
// module tests keep the layout of docs/backend.md: the root module requires
// no cloud SDK, grpc or mcp-go, and go.work uses every module.
package importcheck
