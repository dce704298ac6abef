package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/posture-dev/posture/controllers"
)

// chartPodConfig renders the chart and reads its pods.yaml the way the
// manager does (strictly), so a key the chart writes and the manager does not
// know fails here rather than at a customer's start.
func chartPodConfig(t *testing.T, sets ...string) (controllers.PodConfig, corev1.PodSpec) {
	t.Helper()
	objs := renderChart(t, "posture", sets...)
	var (
		file string
		dep  *unstructured.Unstructured
	)
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetName() == "posture-pods":
			file, _, _ = unstructured.NestedString(o.Object, "data", "pods.yaml")
		case o.GetKind() == "Deployment" && o.GetName() == "posture":
			dep = o
		}
	}
	if file == "" || dep == nil {
		t.Fatalf("the chart renders no ConfigMap posture-pods with pods.yaml, or no Deployment posture")
	}
	path := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := controllers.LoadPodConfig(path)
	if err != nil {
		t.Fatalf("the manager refuses the chart's pods.yaml: %v\n%s", err, file)
	}
	podSpec, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	var pod corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(podSpec, &pod); err != nil {
		t.Fatal(err)
	}
	return cfg, pod
}

// The chart's values reach the file the manager builds worker Jobs and MCP
// servers from, and the manager's own pod.
func TestHelmChartPodSettingsReachTheManager(t *testing.T) {
	cfg, pod := chartPodConfig(t,
		"image.registry=registry.corp/mirror", "image.repository=posture-manager",
		"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "image.pullPolicy=Always",
		"mcpServerImage.registry=registry.corp/mirror", "mcpServerImage.repository=posture-mcp-server", "mcpServerImage.tag=v9",
		"mcpServerImage.pullPolicy=Never",
		"imagePullSecrets[0].name=corp-registry",
		"nodeSelector.pool=posture", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
		"priorityClassName=posture-high",
		"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
		"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
		"worker.nodeSelector.pool=batch",
		"worker.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone",
		"worker.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
		"worker.topologySpreadConstraints[0].maxSkew=2", "worker.topologySpreadConstraints[0].topologyKey=zone",
		"worker.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
		"worker.resources.limits.memory=2Gi", "worker.podLabels.team=security", "worker.podAnnotations.note=batch",
		"worker.extraEnv[0].name=HTTPS_PROXY", "worker.extraEnv[0].value=http://proxy:3128",
		"worker.extraVolumes[0].name=db-ca", "worker.extraVolumes[0].secret.secretName=db-ca",
		"worker.extraVolumeMounts[0].name=db-ca", "worker.extraVolumeMounts[0].mountPath=/etc/db-ca",
		"mcpServer.priorityClassName=posture-tools", "mcpServer.resources.requests.cpu=200m", "mcpServer.podLabels.team=agents",
		"mcpServer.allowedAPIBaseURLs[0]=https://api.example/api/v1",
	)
	w, m := cfg.Worker, cfg.MCPServer
	digestImage := "registry.corp/mirror/posture-manager@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hasArg := func(arg string) bool { return slices.Contains(pod.Containers[0].Args, arg) }
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"worker image from registry, repository and digest", w.Image == digestImage},
		{"worker pull policy is the manager's", w.ImagePullPolicy == corev1.PullAlways},
		{"worker pull secrets", len(w.ImagePullSecrets) == 1 && w.ImagePullSecrets[0].Name == "corp-registry"},
		{"worker node selector of its own", w.NodeSelector["pool"] == "batch"},
		{"worker tolerations default to the manager's", len(w.Tolerations) == 1 && w.Tolerations[0].Key == "dedicated"},
		{"worker priority class defaults to the manager's", w.PriorityClassName == "posture-high"},
		{"worker affinity", w.Affinity != nil && w.Affinity.NodeAffinity != nil},
		{"worker topology spread", len(w.TopologySpreadConstraints) == 1 && w.TopologySpreadConstraints[0].MaxSkew == 2},
		{"worker resources", w.Resources != nil && w.Resources.Limits.Memory().String() == "2Gi"},
		{"worker pod labels and annotations", w.PodLabels["team"] == "security" && w.PodAnnotations["note"] == "batch"},
		{"worker extra env, volumes, mounts", len(w.ExtraEnv) == 1 && len(w.ExtraVolumes) == 1 && len(w.ExtraVolumeMounts) == 1 &&
			w.ExtraVolumes[0].Secret.SecretName == "db-ca"},
		{"MCP image", m.Image == "registry.corp/mirror/posture-mcp-server:v9"},
		{"MCP pull policy", m.ImagePullPolicy == corev1.PullNever},
		{"MCP pull secrets", len(m.ImagePullSecrets) == 1},
		{"MCP node selector defaults to the manager's", m.NodeSelector["pool"] == "posture"},
		{"MCP priority class of its own", m.PriorityClassName == "posture-tools"},
		{"MCP resources", m.Resources != nil && m.Resources.Requests.Cpu().String() == "200m"},
		{"MCP pod labels", m.PodLabels["team"] == "agents"},
		{"manager reads the file", hasArg("--pod-config=/etc/posture/pods.yaml")},
		{"manager mcp-image flag matches", hasArg("--mcp-image=registry.corp/mirror/posture-mcp-server:v9")},
		{"manager image by digest", pod.Containers[0].Image == digestImage && pod.Containers[0].ImagePullPolicy == corev1.PullAlways},
		{"manager pull secrets", len(pod.ImagePullSecrets) == 1},
		{"manager priority class", pod.PriorityClassName == "posture-high"},
		{"manager topology spread", len(pod.TopologySpreadConstraints) == 1},
		{"manager mounts the file", slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(v corev1.VolumeMount) bool {
			return v.MountPath == "/etc/posture/pods.yaml" && v.SubPath == "pods.yaml"
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("%s: not so in the rendered chart\nworker: %+v\nmcpServer: %+v", tc.name, w, m)
			}
		})
	}
}

// A CA bundle or proxy given to the manager reaches the workers, which
// connect to the same database, unless the worker section names its own.
func TestHelmChartWorkerTakesTheManagersExtras(t *testing.T) {
	cfg, _ := chartPodConfig(t,
		"extraEnv[0].name=PGSSLROOTCERT", "extraEnv[0].value=/etc/db-ca/ca.crt",
		"extraVolumes[0].name=db-ca", "extraVolumes[0].configMap.name=db-ca",
		"extraVolumeMounts[0].name=db-ca", "extraVolumeMounts[0].mountPath=/etc/db-ca",
		"worker.extraEnv[0].name=HTTPS_PROXY", "worker.extraEnv[0].value=http://proxy:3128",
	)
	w := cfg.Worker
	if len(w.ExtraEnv) != 1 || w.ExtraEnv[0].Name != "HTTPS_PROXY" {
		t.Errorf("worker extraEnv %+v, want the worker's own", w.ExtraEnv)
	}
	if len(w.ExtraVolumes) != 1 || w.ExtraVolumes[0].ConfigMap == nil || len(w.ExtraVolumeMounts) != 1 || w.ExtraVolumeMounts[0].MountPath != "/etc/db-ca" {
		t.Errorf("worker volumes %+v and mounts %+v, want the manager's CA bundle", w.ExtraVolumes, w.ExtraVolumeMounts)
	}
	if want := (controllers.PodSettings{Image: cfg.MCPServer.Image, ImagePullPolicy: cfg.MCPServer.ImagePullPolicy}); !reflect.DeepEqual(cfg.MCPServer, want) {
		t.Errorf("MCP servers took settings meant for the database: %+v", cfg.MCPServer)
	}
}

// With default values the file names the images and nothing else the
// operator would not have chosen itself.
func TestHelmChartPodSettingsDefaults(t *testing.T) {
	cfg, _ := chartPodConfig(t)
	if !strings.HasPrefix(cfg.Worker.Image, "ghcr.io/posture-dev/posture-manager:") || !strings.HasPrefix(cfg.MCPServer.Image, "ghcr.io/posture-dev/posture-mcp-server:") {
		t.Errorf("images %q and %q, want the chart's defaults", cfg.Worker.Image, cfg.MCPServer.Image)
	}
	if cfg.Worker.Resources != nil || cfg.MCPServer.Resources != nil || cfg.Worker.NodeSelector != nil || len(cfg.Worker.Tolerations) > 0 {
		t.Errorf("defaults set pod settings the operator would choose itself: %+v", cfg)
	}
}

// The kustomize install gives worker Jobs the manager's full image
// reference, never the bare placeholder name the base manifest carries.
func TestKustomizeWorkerImageIsTheManagers(t *testing.T) {
	for _, o := range render(t, "config/default") {
		if o.GetKind() != "Deployment" || o.GetName() != "posture-manager" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, raw := range containers {
			var c corev1.Container
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.(map[string]any), &c); err != nil {
				t.Fatal(err)
			}
			if c.Name != "manager" {
				continue
			}
			for _, e := range c.Env {
				if e.Name == "POSTURE_WORKER_IMAGE" {
					if e.Value != c.Image || !strings.Contains(e.Value, "/") {
						t.Fatalf("POSTURE_WORKER_IMAGE = %q, want the manager's image %q", e.Value, c.Image)
					}
					return
				}
			}
		}
	}
	t.Fatal("config/default renders no posture-manager Deployment whose manager container sets POSTURE_WORKER_IMAGE")
}
