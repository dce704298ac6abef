package controllers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Counters of ended ingestions. They are counted by the controller that
// ends them, which runs on the elected leader only: after a failover the new
// leader starts from zero, which rate() and increase() take in their stride.
var (
	ingestionsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "posture_ingestions_ended_total",
		Help: "Ingestions that reached a terminal phase (completed or failed).",
	}, []string{"phase"})
	ingestionRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "posture_ingestion_records_total",
		Help: "Records of ended ingestions by result: valid (stored as findings) or invalid (rejected).",
	}, []string{"result"})
	ingestionErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "posture_ingestion_errors_total",
		Help: "Error rows of ended ingestions by code: one per rejected record, and one per ingestion that failed as a whole.",
	}, []string{"code"})
	ingestionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "posture_ingestion_duration_seconds",
		Help: "Time from an ingestion's start (its first attempt) to its end, by terminal phase.",
		// One second to about four and a half hours.
		Buckets: prometheus.ExponentialBuckets(1, 2, 15),
	}, []string{"phase"})
)

var (
	registerOnce sync.Once
	cacheGauges  = &cacheCollector{}
)

// RegisterMetrics adds the operator's metrics to controller-runtime's
// registry, which the manager serves on its authenticated metrics endpoint.
// The gauges are read from the manager's cache at each scrape, so they are
// right on every replica, the leader or not.
func RegisterMetrics(cache client.Reader) {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(ingestionsEnded, ingestionRecords, ingestionErrors, ingestionDuration, cacheGauges)
	})
	cacheGauges.reader.Store(&cache)
}

// observeEnded counts an ingestion once its terminal status is written;
// codes are its error rows by code.
func observeEnded(ing *posturev1.Ingestion, codes map[string]int) {
	phase := string(ing.Status.Phase)
	ingestionsEnded.WithLabelValues(phase).Inc()
	s := ing.Status.Summary
	ingestionRecords.WithLabelValues("valid").Add(float64(max(s.Processed-s.Invalid, 0)))
	ingestionRecords.WithLabelValues("invalid").Add(float64(s.Invalid))
	for code, n := range codes {
		ingestionErrors.WithLabelValues(code).Add(float64(n))
	}
	if ing.Status.StartedAt != nil && ing.Status.CompletedAt != nil {
		ingestionDuration.WithLabelValues(phase).Observe(ing.Status.CompletedAt.Sub(ing.Status.StartedAt.Time).Seconds())
	}
}

var (
	ingestionsDesc = prometheus.NewDesc("posture_ingestions",
		"Ingestions that exist now, by phase (pending, processing, completed, failed).", []string{"phase"}, nil)
	queueDesc = prometheus.NewDesc("posture_ingestion_queue_depth",
		"Ingestions waiting for a worker: phase pending, or not yet seen by the controller.", nil, nil)
	providersDesc = prometheus.NewDesc("posture_tenant_providers",
		"Billed providers of a tenant.", []string{"tenant"}, nil)
	providerLimitDesc = prometheus.NewDesc("posture_tenant_provider_limit",
		"The tenant's provider limit; 0 is unlimited.", []string{"tenant"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("posture_metrics_cache_read_errors",
		"1 when this scrape could not read Ingestions or Tenants from the cache (their gauges are missing).", nil, nil)
)

// cacheCollector counts from the informer cache: a scrape costs a walk over
// objects already in memory, never a call to the API server.
type cacheCollector struct{ reader atomic.Pointer[client.Reader] }

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ingestionsDesc, queueDesc, providersDesc, providerLimitDesc, scrapeErrorDesc} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.reader.Load()
	if r == nil {
		return
	}
	reader := *r
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	var ings posturev1.IngestionList
	if err := reader.List(ctx, &ings); err != nil {
		errs = append(errs, err)
	} else {
		byPhase := map[posturev1.IngestionPhase]int{
			posturev1.IngestionPending: 0, posturev1.IngestionProcessing: 0,
			posturev1.IngestionCompleted: 0, posturev1.IngestionFailed: 0,
		}
		queued := 0
		for i := range ings.Items {
			phase := ings.Items[i].Status.Phase
			if phase == "" || phase == posturev1.IngestionPending {
				queued++
				phase = posturev1.IngestionPending
			}
			byPhase[phase]++
		}
		for phase, n := range byPhase {
			ch <- prometheus.MustNewConstMetric(ingestionsDesc, prometheus.GaugeValue, float64(n), string(phase))
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(queued))
	}
	var tenants posturev1.TenantList
	if err := reader.List(ctx, &tenants); err != nil {
		errs = append(errs, err)
	} else {
		for i := range tenants.Items {
			t := &tenants.Items[i]
			ch <- prometheus.MustNewConstMetric(providersDesc, prometheus.GaugeValue, float64(t.Status.Providers), t.Name)
			ch <- prometheus.MustNewConstMetric(providerLimitDesc, prometheus.GaugeValue, float64(t.Status.ProviderLimit), t.Name)
		}
	}
	failed := 0.0
	if errors.Join(errs...) != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
}
