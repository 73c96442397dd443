package storetest

import "testing"

func runMerge(t *testing.T, h Harness) {
	t.Skip("suite not written yet")
}
