package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helm runs the real Helm CLI (built by hack/node-tools.sh) against the
// cluster, from the host.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.tool("helm"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
	// Helm keeps its cache and config under HOME; a throwaway one per
	// cluster leaves the user's alone.
	home := c.path("helm-home")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Posture describes one install of the chart.
type Posture struct {
	// Chart is the chart's directory (charts/posture).
	Chart string
	// Release and Namespace default to posture and posture-system.
	Release, Namespace string
	// Set holds --set key=value pairs; none installs the chart's defaults.
	Set []string
	// StoreSecret: create the store Secret posture-store holding the
	// node's PostgreSQL DSN, as an operator does before installing with
	// store.driver=postgres (the default).
	StoreSecret bool
}

func (p *Posture) defaults() {
	if p.Release == "" {
		p.Release = "posture"
	}
	if p.Namespace == "" {
		p.Namespace = "posture-system"
	}
}

// HelmArgs are the arguments of helm upgrade --install for p.
func (p Posture) HelmArgs() []string {
	p.defaults()
	args := []string{"upgrade", "--install", p.Release, p.Chart, "--namespace", p.Namespace, "--create-namespace"}
	for _, s := range p.Set {
		args = append(args, "--set", s)
	}
	return args
}

// InstallPosture installs (or upgrades) the chart and waits until every
// manager pod is Ready and, when the aggregated API is on, the APIService is
// Available.
func (c *Cluster) InstallPosture(ctx context.Context, p Posture, replicas int, aggregated bool) error {
	p.defaults()
	cl, err := c.Client()
	if err != nil {
		return err
	}
	if p.StoreSecret {
		if c.State.PostgresDSN == "" {
			return fmt.Errorf("the cluster runs no PostgreSQL for the store Secret")
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
		if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "posture-store", Namespace: p.Namespace},
			StringData: map[string]string{"dsn": c.State.PostgresDSN},
		}
		if err := cl.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if _, err := c.Helm(ctx, p.HelmArgs()...); err != nil {
		return err
	}
	if err := c.WaitRollout(ctx, p.Namespace, p.Release, 3*time.Minute); err != nil {
		return err
	}
	if err := c.WaitPodsReady(ctx, p.Namespace, "app.kubernetes.io/instance="+p.Release+",app.kubernetes.io/component=manager", replicas, 3*time.Minute); err != nil {
		return err
	}
	if aggregated {
		return c.WaitAPIServiceAvailable(ctx, "v1alpha1.data.posture.dev", 2*time.Minute)
	}
	return nil
}

// WaitRollout waits until the Deployment's newest ReplicaSet runs every
// replica, Ready, and no old pod is left.
func (c *Cluster) WaitRollout(ctx context.Context, namespace, name string, timeout time.Duration) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "deployment "+namespace+"/"+name+" to roll out", timeout, []string{"kubelet", "containerd"}, func(ctx context.Context) error {
		var d unstructured.Unstructured
		d.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
		if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
			return err
		}
		gen := d.GetGeneration()
		observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
		want, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
		updated, _, _ := unstructured.NestedInt64(d.Object, "status", "updatedReplicas")
		ready, _, _ := unstructured.NestedInt64(d.Object, "status", "readyReplicas")
		total, _, _ := unstructured.NestedInt64(d.Object, "status", "replicas")
		if observed < gen || updated < want || ready < want || total > want {
			return fmt.Errorf("generation %d observed %d; replicas %d updated %d ready %d total %d%s",
				gen, observed, want, updated, ready, total, c.podProblems(ctx, namespace))
		}
		return nil
	})
}

// podProblems names the pods of a namespace that do not run, and why.
func (c *Cluster) podProblems(ctx context.Context, namespace string) string {
	cl, err := c.Client()
	if err != nil {
		return ""
	}
	var pods corev1.PodList
	if cl.List(ctx, &pods, client.InNamespace(namespace)) != nil {
		return ""
	}
	var out []string
	for _, p := range pods.Items {
		if why := waitingReason(p); why != "" {
			out = append(out, p.Name+why)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// WaitAPIServiceAvailable waits until kube-apiserver reaches the named
// APIService's backend (condition Available).
func (c *Cluster) WaitAPIServiceAvailable(ctx context.Context, name string, timeout time.Duration) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "APIService "+name+" to be Available", timeout, []string{"kube-apiserver"}, func(ctx context.Context) error {
		var a unstructured.Unstructured
		a.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &a); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
		for _, co := range conds {
			m, _ := co.(map[string]any)
			if m["type"] == "Available" {
				if m["status"] == "True" {
					return nil
				}
				return fmt.Errorf("Available=%v: %v: %v", m["status"], m["reason"], m["message"])
			}
		}
		return fmt.Errorf("no Available condition yet")
	})
}
