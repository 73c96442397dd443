package storetest

import "testing"

func runSideEffect(t *testing.T, h Harness) {
	t.Skip("suite not written yet")
}
