package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/posture-dev/posture/internal/restapi"
)

// TestWaitRetriesTransientFailures: ingestions wait keeps polling through
// what may pass (5xx, 429: up to three failures in a row) and stops at once
// on what will not (4xx), saying which.
func TestWaitRetriesTransientFailures(t *testing.T) {
	const done = `{"data":{"type":"ingestions","id":"j1","attributes":{"status":"completed","summary":{"total":3,"processed":3,"invalid":0}}},"meta":{"version":"v1"}}`
	errorDoc := func(status, code string) string {
		return `{"errors":[{"status":"` + status + `","code":"` + code + `","detail":"` + code + ` here"}],"meta":{"version":"v1"}}`
	}
	for _, tc := range []struct {
		name     string
		failures []int // statuses answered before the job, in order
		code     int
		calls    int64
		warnings int
		stderr   string
	}{
		{"no failure", nil, ExitOK, 1, 0, ""},
		{"three transient failures", []int{503, 429, 500}, ExitOK, 4, 3, "attempt 3 of 4"},
		{"four transient failures", []int{503, 503, 503, 502}, ExitError, 4, 3, "HTTP 502"},
		{"not found", []int{404}, ExitError, 1, 0, "HTTP 404 Not Found: not_found here"},
		{"unauthorized", []int{401}, ExitError, 1, 0, "Verify POSTURE_API_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if r.URL.Path != "/api/v1/ingestions/j1" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", restapi.MediaType)
				if n <= len(tc.failures) {
					s := tc.failures[n-1]
					w.WriteHeader(s)
					_, _ = io.WriteString(w, errorDoc(http.StatusText(s), map[int]string{404: "not_found", 401: "not_authenticated"}[s]))
					return
				}
				_, _ = io.WriteString(w, done)
			}))
			defer srv.Close()
			res := run(t, envWith(EnvAPIURL, srv.URL+"/api/v1", EnvAPIKey, "pk_test.key"), "ingestions", "wait", "j1", "--interval", "1ms")
			if res.code != tc.code || calls.Load() != tc.calls || strings.Count(res.stderr, "trying again") != tc.warnings || !strings.Contains(res.stderr, tc.stderr) {
				t.Fatalf("wait: %s after %d calls; want exit %d after %d calls, %d warnings and %q", res, calls.Load(), tc.code, tc.calls, tc.warnings, tc.stderr)
			}
		})
	}
}
