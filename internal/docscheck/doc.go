// Package docscheck holds tests that keep the README, docs/ and the doc
// comments in agreement with the code: the error codes they list, and what
// they say a repeat runs. It has no code of its own.
package docscheck
