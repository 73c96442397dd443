package mergetest_test

import (
	"flag"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Several tests expect Verify to fail; their counter-examples are not
	// regressions to replay, so rapid must not save them under testdata.
	if err := flag.Set("rapid.nofailfile", "true"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
