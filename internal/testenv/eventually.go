package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 50 ms until it holds, and fails t with cond's
// last description of the state once timeout has passed. Controllers and
// caches settle asynchronously, so tests wait for a state, never for a time.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
