package controllers

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
)

// podConfigFile is what the chart renders for an install on tainted nodes
// behind a private registry.
const podConfigFile = `
worker:
  image: registry.corp/mirror/posture-manager@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  imagePullPolicy: Always
  imagePullSecrets: [{name: corp-registry}]
  nodeSelector: {pool: batch}
  tolerations: [{key: dedicated, operator: Equal, value: posture, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
  priorityClassName: posture-batch
  resources:
    requests: {cpu: "1", memory: 1Gi}
    limits: {memory: 2Gi}
  podLabels: {team: security, app.kubernetes.io/component: hijack}
  podAnnotations: {sidecar.istio.io/inject: "false"}
  extraEnv: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
  extraVolumes: [{name: db-ca, secret: {secretName: db-ca}}]
  extraVolumeMounts: [{name: db-ca, mountPath: /etc/db-ca, readOnly: true}]
mcpServer:
  image: registry.corp/mirror/posture-mcp-server:v9
  imagePullPolicy: Never
  imagePullSecrets: [{name: corp-registry}]
  nodeSelector: {pool: tools}
  tolerations: [{key: dedicated, operator: Exists}]
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 1
          podAffinityTerm: {topologyKey: kubernetes.io/hostname}
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  priorityClassName: posture-tools
  resources:
    requests: {cpu: 200m}
  podLabels: {team: agents, app.kubernetes.io/instance: hijack}
  podAnnotations: {example.com/scrape: "no"}
`

func loadTestPodConfig(t *testing.T) PodConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(path, []byte(podConfigFile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadPodConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every setting of the worker section lands in the Job's pod, and none of
// them displaces what the operator itself relies on.
func TestBuildWorkerJobFollowsPodConfig(t *testing.T) {
	cfg := loadTestPodConfig(t)
	ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "ing-1", Namespace: "tenant-demo", UID: "uid-1"}}
	job := BuildWorkerJob(WorkerJobConfig{
		Namespace: "posture-system", Image: "posture-manager", ImagePullPolicy: corev1.PullIfNotPresent,
		StoreDriver: "postgres", StoreSecret: "posture-store", Pod: cfg.Worker,
	}, ing, ingest.Attempt{Tenant: "demo", IngestionID: "ing-1", BlobID: "b", Attempt: 1})
	pod := job.Spec.Template
	c := pod.Spec.Containers[0]
	w := cfg.Worker
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"image by digest", c.Image == w.Image},
		{"pull policy", c.ImagePullPolicy == corev1.PullAlways},
		{"pull secrets", reflect.DeepEqual(pod.Spec.ImagePullSecrets, w.ImagePullSecrets)},
		{"node selector", reflect.DeepEqual(pod.Spec.NodeSelector, w.NodeSelector)},
		{"tolerations", reflect.DeepEqual(pod.Spec.Tolerations, w.Tolerations)},
		{"affinity", reflect.DeepEqual(pod.Spec.Affinity, w.Affinity)},
		{"topology spread", reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, w.TopologySpreadConstraints)},
		{"priority class", pod.Spec.PriorityClassName == "posture-batch"},
		{"resources", c.Resources.Requests.Cpu().Equal(resource.MustParse("1")) && c.Resources.Limits.Memory().Equal(resource.MustParse("2Gi"))},
		{"pod label added", pod.Labels["team"] == "security"},
		{"the operator's labels win over podLabels", pod.Labels[LabelComponent] == "ingestion-worker" && pod.Labels[LabelIngestionUID] == "uid-1"},
		{"the Job's own labels are untouched", job.Labels["team"] == "" && job.Labels[LabelComponent] == "ingestion-worker"},
		{"pod annotation", pod.Annotations["sidecar.istio.io/inject"] == "false"},
		{"extra env before the store's, which the kubelet lets win", len(c.Env) == 3 && c.Env[0].Name == "HTTPS_PROXY" && c.Env[2].Name == "POSTURE_STORE_DSN"},
		{"extra volume beside /tmp", len(pod.Spec.Volumes) == 2 && pod.Spec.Volumes[0].Name == "tmp" && pod.Spec.Volumes[1].Secret.SecretName == "db-ca"},
		{"extra mount beside /tmp", len(c.VolumeMounts) == 2 && c.VolumeMounts[1].MountPath == "/etc/db-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("worker pod does not follow --pod-config: %s\npod: %+v", tc.name, pod)
			}
		})
	}
}

func TestBuildMCPDeploymentFollowsPodConfig(t *testing.T) {
	cfg := loadTestPodConfig(t)
	d := testDefaults
	d.Pod = cfg.MCPServer
	dep := BuildMCPDeployment(mcpServer(nil), d)
	pod := dep.Spec.Template
	c := pod.Spec.Containers[0]
	m := cfg.MCPServer
	withSpecResources := BuildMCPDeployment(mcpServer(func(m *posturev1.MCPServer) {
		m.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	}), d).Spec.Template.Spec.Containers[0].Resources
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"image", c.Image == m.Image},
		{"pull policy", c.ImagePullPolicy == corev1.PullNever},
		{"pull secrets", reflect.DeepEqual(pod.Spec.ImagePullSecrets, m.ImagePullSecrets)},
		{"node selector", reflect.DeepEqual(pod.Spec.NodeSelector, m.NodeSelector)},
		{"tolerations", reflect.DeepEqual(pod.Spec.Tolerations, m.Tolerations)},
		{"affinity", reflect.DeepEqual(pod.Spec.Affinity, m.Affinity)},
		{"topology spread", reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, m.TopologySpreadConstraints)},
		{"priority class", pod.Spec.PriorityClassName == "posture-tools"},
		{"resources when the MCPServer names none", c.Resources.Requests.Cpu().Equal(resource.MustParse("200m"))},
		{"spec.resources win over the install's", withSpecResources.Requests == nil && withSpecResources.Limits.Memory().Equal(resource.MustParse("1Gi"))},
		{"pod label added", pod.Labels["team"] == "agents"},
		{"selector labels win over podLabels", pod.Labels[LabelInstance] == "tools"},
		{"pod annotation", pod.Annotations["example.com/scrape"] == "no"},
		{"config hash kept", pod.Annotations[AnnotationConfigHash] != ""},
		{"the settings change the config hash", pod.Annotations[AnnotationConfigHash] != BuildMCPPodTemplate(mcpServer(nil), testDefaults).Annotations[AnnotationConfigHash]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("MCP pod does not follow --pod-config: %s\npod: %+v", tc.name, pod)
			}
		})
	}
}

func TestLoadPodConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"unknown section", "workers: {}\n", `unknown field "workers"`},
		{"misspelt key", "worker: {nodeSelectors: {a: b}}\n", `unknown field "nodeSelectors"`},
		{"worker-only key under mcpServer", "mcpServer: {extraEnv: []}\n", `unknown field "extraEnv"`},
		{"bad pull policy", "mcpServer: {imagePullPolicy: Sometimes}\n", `mcpServer.imagePullPolicy "Sometimes"`},
		{"wrong type", "worker: {tolerations: {key: a}}\n", "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pods.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadPodConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadPodConfig(%q) = %v, want an error naming the file and %q", tc.file, err, tc.want)
			}
		})
	}
}
