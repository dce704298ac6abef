package webhook

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "posture_api_requests_total",
		Help: "REST API requests by route (the pattern that matched, never the raw path), method and status code.",
	}, []string{"route", "method", "code"})
	apiLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "posture_api_request_duration_seconds",
		Help:    "REST API request latency by route and method, until the handler returned.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"route", "method"})
	uploadBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "posture_upload_bytes",
		Help: "Bytes of report read per upload, by result: accepted (an Ingestion was created) or rejected.",
		// 1 KiB to 1 GiB (the default upload limit), by factors of 4.
		Buckets: prometheus.ExponentialBuckets(1024, 4, 11),
	}, []string{"result"})
	uploadDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "posture_upload_duration_seconds",
		Help:    "Time to receive, check and store one uploaded report, by result.",
		Buckets: []float64{.01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(apiRequests, apiLatency, uploadBytes, uploadDuration)
}

// unmatchedRoute labels requests no route took: a scanner's random paths
// must not each become a series.
const unmatchedRoute = "unmatched"

// knownMethods bounds the method label the same way.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// instrument counts and times each request under the mux pattern that
// served it. ServeMux writes the pattern into the request it is given, so it
// is known once the handler returns.
func instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			route := r.Pattern
			if route == "" {
				route = unmatchedRoute
			}
			method := r.Method
			if !knownMethods[method] {
				method = "other"
			}
			code := rec.status
			if code == 0 {
				// A handler that panicked or wrote nothing: net/http answers
				// 200 for the latter, the recoverer 500 for the former.
				code = http.StatusOK
			}
			apiRequests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
			apiLatency.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
	})
}

// statusRecorder keeps the status code; Unwrap lets http.ResponseController
// reach the connection (uploads set read deadlines through it).
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observeUpload records one upload's size and time.
func observeUpload(start time.Time, bytes int64, err error) {
	result := "accepted"
	if err != nil {
		result = "rejected"
	}
	uploadBytes.WithLabelValues(result).Observe(float64(max(bytes, 0)))
	uploadDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}
