package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/localcluster"
)

// seedDemo applies the demo tenants make dev has, and an MCPServer in the
// demo tenant whose Deployment the operator runs on the node, and returns
// the lines of .cluster/env: the same names as .dev/env, with addresses the
// host reaches (Service IPs, routed to the node).
func seedDemo(ctx context.Context, c *localcluster.Cluster) ([]string, error) {
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	step("seeding the demo tenants (demo, other, nosub) and their API keys")
	// The namespaces exist already (restricted, above): nothing is "kept".
	seed, err := demo.Seed(ctx, cl, func(string) {})
	if err != nil {
		return nil, err
	}
	if err := seed.AwaitKeys(ctx, cl); err != nil {
		return nil, err
	}
	api, err := serviceAddr(ctx, cl, "posture-system", "posture-api")
	if err != nil {
		return nil, err
	}
	apiURL := "http://" + api
	step("creating MCPServer %s/demo and waiting for its pod", seed.Namespace)
	m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: seed.Namespace}}
	if err := cl.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create MCPServer %s/demo: %w", seed.Namespace, err)
	}
	if err := waitFor(ctx, func() error { return c.WaitRollout(ctx, seed.Namespace, "demo", 2*time.Minute) }); err != nil {
		return nil, err
	}
	mcp, err := serviceAddr(ctx, cl, seed.Namespace, "demo")
	if err != nil {
		return nil, err
	}
	metricsURL, metricsToken, err := metricsAccess(ctx, c, cl)
	if err != nil {
		return nil, err
	}
	vars := []string{
		"KUBECONFIG=" + c.Kubeconfig(),
		"POSTURE_API_URL=" + apiURL,
		// The manager serves the web UI at / on the API's address.
		"POSTURE_UI_URL=" + apiURL + "/",
		"POSTURE_MCP_URL=http://" + mcp + "/mcp",
		"POSTURE_TENANT_NAMESPACE=" + seed.Namespace,
		// One manager pod's metrics (each replica serves its own), and a
		// day's token of a ServiceAccount bound to the chart's
		// posture-metrics-reader, as a Prometheus in the cluster would be.
		"POSTURE_METRICS_URL=" + metricsURL,
		"POSTURE_METRICS_TOKEN=" + metricsToken,
	}
	vars = append(vars, seed.EnvVars...)
	return append(vars, demo.PushVars(vars, apiURL)...), nil
}

// waitFor retries f while the Deployment it waits for does not exist yet.
func waitFor(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil || !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// serviceAddr is a Service's ClusterIP and first port.
func serviceAddr(ctx context.Context, cl client.Client, namespace, name string) (string, error) {
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
		return "", fmt.Errorf("service %s/%s: %w", namespace, name, err)
	}
	if svc.Spec.ClusterIP == "" || len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("service %s/%s has no ClusterIP or port", namespace, name)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))), nil
}

// metricsAccess is one manager pod's metrics address and a token of the
// chart's metrics reader.
func metricsAccess(ctx context.Context, c *localcluster.Cluster, cl client.Client) (url, token string, err error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return "", "", err
	}
	token, err = demo.MetricsToken(ctx, cfg, cl)
	if err != nil {
		return "", "", err
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace("posture-system"), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		return "", "", err
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return "https://" + net.JoinHostPort(p.Status.PodIP, "8082") + "/metrics", token, nil
		}
	}
	return "", "", fmt.Errorf("no manager pod with an address in posture-system")
}
