package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/testenv"
	_ "github.com/posture-dev/posture/webhook" // registers the API's metrics
)

// registeredMetrics are the names the manager serves (histograms also as
// _bucket, _sum and _count).
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	controllers.RegisterMetrics(c)
	// A vector without series is missing from Gather: its descriptor is not.
	reg, ok := ctrlmetrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatalf("controller-runtime's registry (%T) cannot describe its metrics", ctrlmetrics.Registry)
	}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

var postureMetric = regexp.MustCompile(`\bposture_[a-z_]+\b`)

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// The monitoring toggles render what prometheus-operator and Grafana need,
// scraping over HTTPS with a token, and every query names a metric the
// manager really serves.
func TestHelmChartMonitoring(t *testing.T) {
	known := registeredMetrics(t)
	dashboard, err := os.ReadFile(filepath.Join(testenv.Root(), "charts", "posture", "dashboards", "posture.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sets  []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{"off by default", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
				if find(objs, kind, "") != nil {
					t.Errorf("the defaults render a %s (prometheus-operator may not be installed)", kind)
				}
			}
		}},
		{"ServiceMonitor", []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=kps",
			"metrics.readers[0].name=prometheus-k8s", "metrics.readers[0].namespace=monitoring"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			sm := find(objs, "ServiceMonitor", "posture")
			svc := find(objs, "Service", "posture-metrics")
			if sm == nil || svc == nil {
				t.Fatal("no ServiceMonitor posture or Service posture-metrics")
			}
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			ep, _ := eps[0].(map[string]any)
			if ep["scheme"] != "https" || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" || ep["port"] != "https" {
				t.Errorf("endpoint %v: want https with Prometheus's token on port https", ep)
			}
			if sm.GetLabels()["release"] != "kps" {
				t.Errorf("ServiceMonitor labels %v lack release=kps", sm.GetLabels())
			}
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			for k, v := range sel {
				if svc.GetLabels()[k] != v {
					t.Errorf("the ServiceMonitor selects %s=%s, which the metrics Service lacks", k, v)
				}
			}
			crb := find(objs, "ClusterRoleBinding", "posture-metrics-reader")
			if crb == nil || !strings.Contains(toJSON(t, crb), `"name":"prometheus-k8s","namespace":"monitoring"`) {
				t.Errorf("Prometheus's ServiceAccount is not bound to the metrics reader role: %v", crb)
			}
			admitExcept(t, objs, "ServiceMonitor")
		}},
		{"PodMonitor", []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.podMonitor=true"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			pm := find(objs, "PodMonitor", "posture")
			if pm == nil || find(objs, "ServiceMonitor", "") != nil {
				t.Fatal("want a PodMonitor and no ServiceMonitor")
			}
			eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
			ep, _ := eps[0].(map[string]any)
			secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
			if ep["scheme"] != "https" || secret != "posture-metrics-scraper-token" {
				t.Errorf("pod endpoint %v: want https with the scraper's token", ep)
			}
			if s := find(objs, "Secret", secret); s == nil || s.GetAnnotations()["kubernetes.io/service-account.name"] != "posture-metrics-scraper" {
				t.Errorf("no token Secret %s for ServiceAccount posture-metrics-scraper", secret)
			}
			if find(objs, "ClusterRoleBinding", "posture-metrics-scraper") == nil {
				t.Error("the scraper is not bound to the metrics reader role")
			}
			admitExcept(t, objs, "PodMonitor")
		}},
		{"PrometheusRule and dashboard", []string{"metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			rule := find(objs, "PrometheusRule", "posture")
			if rule == nil {
				t.Fatal("no PrometheusRule")
			}
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			var alerts []string
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					rm := r.(map[string]any)
					alerts = append(alerts, rm["alert"].(string))
					checkNames(t, "alert "+rm["alert"].(string), rm["expr"].(string), known)
				}
			}
			for _, want := range []string{"PostureIngestionsFailing", "PostureIngestionQueueGrowing", "PostureTenantAtProviderLimit"} {
				if !slices.Contains(alerts, want) {
					t.Errorf("no alert %s among %v", want, alerts)
				}
			}
			cm := find(objs, "ConfigMap", "posture-dashboard")
			if cm == nil || cm.GetLabels()["grafana_dashboard"] != "1" {
				t.Fatal("no dashboard ConfigMap labelled for Grafana's sidecar")
			}
			if got, _, _ := unstructured.NestedString(cm.Object, "data", "posture.json"); got != string(dashboard) {
				t.Error("the dashboard ConfigMap does not hold charts/posture/dashboards/posture.json")
			}
			admitExcept(t, objs, "PrometheusRule")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, renderChart(t, "posture", tc.sets...)) })
	}

	t.Run("dashboard queries", func(t *testing.T) {
		var d struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(dashboard, &d); err != nil {
			t.Fatalf("dashboards/posture.json: %v", err)
		}
		if len(d.Panels) == 0 {
			t.Fatal("the dashboard has no panels")
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				checkNames(t, "panel "+p.Title, tg.Expr, known)
			}
		}
	})
}

func checkNames(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	names := postureMetric.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s queries no posture metric: %s", where, expr)
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s queries %s, which the manager does not serve", where, n)
		}
	}
}

func toJSON(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	b, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// admitExcept has the API server admit everything but the kinds whose CRDs
// (prometheus-operator's) are not installed here.
func admitExcept(t *testing.T, objs []*unstructured.Unstructured, skip ...string) {
	t.Helper()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("posture-system")
	admitted := []*unstructured.Unstructured{ns}
	for _, o := range objs {
		if !slices.Contains(skip, o.GetKind()) && o.GetKind() != "Certificate" {
			admitted = append(admitted, o)
		}
	}
	admit(t, admitted)
}
