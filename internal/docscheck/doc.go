// Package docscheck holds tests that keep the README, docs/ and the doc
// comments in agreement with the code: the error codes they list, and what
// they say a repeat runs; and that keep go build's binaries out of the
// repository. It has no code of its own.
package docscheck
