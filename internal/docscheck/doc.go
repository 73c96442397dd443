// Package docscheck keeps the README, docs/ and the doc comments in
// agreement with the code: its tests check the error codes the pages list,
// what they say a repeat runs, that links, paths and Go doc links resolve,
// that a list of the stores names them all, and that go build's binaries
// are kept out of the repository. Survey, called by each example's tests,
// checks docs/survey.md's table of the example's tools against what it
// lists.
package docscheck
