package argsfp

import (
	"bytes"
	"crypto/sha256"
)

// clearSpan is searched by clearVectorUpper: longer than 32 bytes, so that
// the search takes its AVX2 path.
var clearSpan [64]byte

// clearVectorUpper clears the upper halves of the CPU's vector registers
// (VZEROUPPER) on an amd64 CPU with AVX2, and does nearly nothing
// elsewhere. Call it before a SHA-256 of a few hundred bytes or less.
//
// segmentio's JSON tokenizer and decoder, which the go-sdk and this module
// read JSON with, check strings with AVX2 routines (segmentio/asm's
// ascii.ValidPrint) that return without VZEROUPPER. Until something clears
// them, the dirty upper halves slow the legacy SSE instructions that run
// after them, the SHA extensions crypto/sha256 uses most of all: right
// after the middleware's walk of a call's arguments, an op record's key
// took 5.8 µs to hash instead of 0.2 µs, and a replay's CPU fell by a
// sixth with this (BenchmarkCallsAlone/replay on PostgreSQL, five paired
// rounds). Whether the halves are dirty depends on which routine ran
// last, so a loop of its own seldom shows it. The standard library's AVX2
// routines end with VZEROUPPER: bytes.IndexByte over more than 32 bytes
// is one, and costs a few nanoseconds.
func clearVectorUpper() { bytes.IndexByte(clearSpan[:], 1) }

// Sum256 is sha256.Sum256 after clearVectorUpper.
func Sum256(data []byte) [sha256.Size]byte {
	clearVectorUpper()
	return sha256.Sum256(data)
}
