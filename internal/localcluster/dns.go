package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// RESTConfig is the admin's client configuration.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Client is a controller-runtime client with the admin's credentials that
// knows the posture.dev kinds.
func (c *Cluster) Client() (client.Client, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := posturev1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// Apply server-side applies every object of a multi-document YAML.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := cl.Patch(ctx, &u, client.Apply, client.FieldOwner("localcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// installDNS runs CoreDNS as the cluster DNS Service. It answers for
// cluster.local and the reverse zones only: nothing is forwarded upstream,
// since nothing may leave the namespace. It listens on 1053 so it needs no
// capability, and runs as non-root with a read-only root.
func (c *Cluster) installDNS(ctx context.Context) error {
	manifests := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
        }
        cache 30
        loop
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      priorityClassName: system-cluster-critical
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: coredns
        image: %[1]s
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 1053, protocol: UDP}
        - {name: dns-tcp, containerPort: 1053, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}}
        resources: {requests: {cpu: 20m, memory: 32Mi}, limits: {memory: 128Mi}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: %[2]s
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
`, coreDNSImage, c.State.DNSIP())
	if err := c.waitFor(ctx, "the node to register", 2*time.Minute, []string{"kubelet", "containerd"}, func(ctx context.Context) error {
		cl, err := c.Client()
		if err != nil {
			return err
		}
		var node corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: c.State.NodeName}, &node); err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready", c.State.NodeName)
	}); err != nil {
		return err
	}
	// The namespace's ServiceAccount appears with it; the Deployment waits
	// for nothing else.
	if err := c.Apply(ctx, []byte(manifests)); err != nil {
		return err
	}
	return c.WaitPodsReady(ctx, "kube-system", "k8s-app=kube-dns", 1, 2*time.Minute)
}

// WaitPodsReady waits until at least n pods match selector in namespace and
// every one of them is Ready.
func (c *Cluster) WaitPodsReady(ctx context.Context, namespace, selector string, n int, timeout time.Duration) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	return c.waitFor(ctx, fmt.Sprintf("pods %s in %s to be Ready", selector, namespace), timeout, []string{"kubelet", "containerd"}, func(ctx context.Context) error {
		sel, err := labelSelector(selector)
		if err != nil {
			return err
		}
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return err
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			ok := false
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("pod %s is %s, not Ready%s", p.Name, p.Status.Phase, waitingReason(p))
			}
			ready++
		}
		if ready < n {
			return fmt.Errorf("%d Ready pods, want %d", ready, n)
		}
		return nil
	})
}

// waitingReason names why a pod's containers do not run (ImagePullBackOff,
// CrashLoopBackOff, …), for error messages.
func waitingReason(p corev1.Pod) string {
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.State.Waiting != nil && s.State.Waiting.Reason != "" {
			return fmt.Sprintf(" (container %s: %s: %s)", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
		}
		if s.State.Terminated != nil {
			return fmt.Sprintf(" (container %s terminated: %s, exit %d)", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
	}
	return ""
}

func labelSelector(s string) (labels.Selector, error) { return labels.Parse(s) }
