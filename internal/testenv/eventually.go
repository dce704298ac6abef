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
	EventuallyEvery(t, timeout, 50*time.Millisecond, what, cond)
}

// EventuallyEvery is Eventually asking every period: for a condition that
// is costly to ask (a kubectl run, a request through a cluster) or that
// changes only every few seconds.
func EventuallyEvery(t testing.TB, timeout, period time.Duration, what string, cond func() (ok bool, state string)) {
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
		time.Sleep(period)
	}
}
