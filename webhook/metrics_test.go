package webhook_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
)

// histogram reads a histogram's sample count and sum; a series that does
// not exist reads 0.
func histogram(t testing.TB, name string, labels ...string) (count uint64, sum float64) {
	t.Helper()
	h := findMetric(t, name, labels...).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// Requests are counted under the route pattern that served them, so that
// ids in paths never become series of their own.
func TestAPIRequestMetrics(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	for _, tc := range []struct {
		name, method, path string
		route, code        string
		times              int
	}{
		{"an id in the path counts under its pattern", http.MethodGet, "/api/v1/ingestions/0b7a1c1e-no-such-id", "/api/v1/ingestions/{id}", "404", 2},
		{"a listing", http.MethodGet, "/api/v1/ingestions", "/api/v1/ingestions", "200", 1},
		{"a wrong method", http.MethodDelete, "/api/v1/ingestions", "/api/v1/ingestions", "405", 1},
		{"an unknown API path falls to the catch-all", http.MethodGet, "/api/v1/nothing/here", "/api/", "404", 1},
		{"a path no route takes", http.MethodGet, "/random-scanner-probe-1", "unmatched", "404", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := []string{"route", tc.route, "method", tc.method, "code", tc.code}
			before := metricValue(t, "posture_api_requests_total", labels...)
			latencyBefore, _ := histogram(t, "posture_api_request_duration_seconds", "route", tc.route, "method", tc.method)
			for range tc.times {
				if r := a.request(tc.method, tc.path, nil, nil); strconv.Itoa(r.status) != tc.code {
					t.Fatalf("%s %s: %s, want %s", tc.method, tc.path, r, tc.code)
				}
			}
			if got := metricValue(t, "posture_api_requests_total", labels...) - before; got != float64(tc.times) {
				t.Errorf("posture_api_requests_total%v grew by %v, want %d", labels, got, tc.times)
			}
			if got, _ := histogram(t, "posture_api_request_duration_seconds", "route", tc.route, "method", tc.method); got-latencyBefore != uint64(tc.times) {
				t.Errorf("latency samples grew by %d, want %d", got-latencyBefore, tc.times)
			}
			if raw := metricValue(t, "posture_api_requests_total", "route", tc.path); tc.path != tc.route && raw != 0 {
				t.Errorf("a series is labelled with the raw path %s", tc.path)
			}
		})
	}
}

func TestUploadMetrics(t *testing.T) {
	b := startBare(t, bareOpts{maxUpload: 64 << 10})
	a := b.api(t)
	report := fixture(t, "aws_3_records.ocsf.json")
	for _, tc := range []struct {
		name, result string
		content      []byte
		status       int
	}{
		{"an accepted report", "accepted", report, http.StatusAccepted},
		{"a report that is not OCSF", "rejected", []byte(`{"not":"an array"}`), http.StatusBadRequest},
		{"a report over the limit", "rejected", append([]byte("["), bytes.Repeat([]byte(" "), 65<<10)...), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n0, sum0 := histogram(t, "posture_upload_bytes", "result", tc.result)
			d0, _ := histogram(t, "posture_upload_duration_seconds", "result", tc.result)
			if r := a.upload("report.ocsf.json", tc.content); r.status != tc.status {
				t.Fatalf("upload: %s, want %d", r, tc.status)
			}
			n1, sum1 := histogram(t, "posture_upload_bytes", "result", tc.result)
			d1, _ := histogram(t, "posture_upload_duration_seconds", "result", tc.result)
			if n1-n0 != 1 || d1-d0 != 1 {
				t.Fatalf("upload samples (bytes, duration) grew by (%d, %d), want one each", n1-n0, d1-d0)
			}
			// The body is the report in a multipart envelope: at least the
			// report's bytes, or the limit's when it was cut off there.
			if got, want := sum1-sum0, float64(min(len(tc.content), 64<<10)); got < want {
				t.Errorf("posture_upload_bytes grew by %v, want at least %v", got, want)
			}
		})
	}
}
