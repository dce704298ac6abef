package controllers

import (
	"bytes"
	"fmt"
	"maps"
	"os"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// PodSettings are the scheduling and image settings of the pods the manager
// creates. They come from the install (the Helm chart renders them into the
// file named by --pod-config), so that a private registry, tainted nodes or a
// priority class reach worker Jobs and MCP servers as they reach the manager.
type PodSettings struct {
	// Image is a full reference (registry/repository:tag or @digest); it
	// replaces the flag-given image.
	Image                     string                            `json:"image,omitempty"`
	ImagePullPolicy           corev1.PullPolicy                 `json:"imagePullPolicy,omitempty"`
	ImagePullSecrets          []corev1.LocalObjectReference     `json:"imagePullSecrets,omitempty"`
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	PriorityClassName         string                            `json:"priorityClassName,omitempty"`
	// Resources replace the built-in requests and limits when set. An
	// MCPServer's own spec.resources still wins over them.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// PodLabels never replace the labels the operator sets: those select
	// pods and link Jobs back to their Ingestion.
	PodLabels      map[string]string `json:"podLabels,omitempty"`
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
}

// WorkerPodSettings add what a worker may need to reach its database: a CA
// bundle in a volume, a proxy in the environment.
type WorkerPodSettings struct {
	PodSettings       `json:",inline"`
	ExtraEnv          []corev1.EnvVar      `json:"extraEnv,omitempty"`
	ExtraVolumes      []corev1.Volume      `json:"extraVolumes,omitempty"`
	ExtraVolumeMounts []corev1.VolumeMount `json:"extraVolumeMounts,omitempty"`
}

// PodConfig is the file given by --pod-config.
type PodConfig struct {
	Worker    WorkerPodSettings `json:"worker,omitempty"`
	MCPServer PodSettings       `json:"mcpServer,omitempty"`
}

// LoadPodConfig reads the file strictly: a misspelt key (tolerations under
// the wrong section, "nodeSelectors") is an error at start rather than a
// setting silently lost on every pod.
func LoadPodConfig(path string) (PodConfig, error) {
	var cfg PodConfig
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("pod config: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("pod config %s: %w", path, err)
	}
	for name, p := range map[string]corev1.PullPolicy{"worker": cfg.Worker.ImagePullPolicy, "mcpServer": cfg.MCPServer.ImagePullPolicy} {
		switch p {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			return cfg, fmt.Errorf("pod config %s: %s.imagePullPolicy %q: want Always, IfNotPresent or Never", path, name, p)
		}
	}
	return cfg, nil
}

// applyPodSettings puts s onto a pod the operator built. The operator's own
// labels are written last, so a podLabels entry cannot change which pods a
// selector finds.
func applyPodSettings(meta *corev1.PodTemplateSpec, s PodSettings) {
	labels := maps.Clone(s.PodLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, meta.Labels)
	meta.Labels = labels
	if len(s.PodAnnotations) > 0 {
		ann := maps.Clone(s.PodAnnotations)
		maps.Copy(ann, meta.Annotations)
		meta.Annotations = ann
	}
	spec := &meta.Spec
	spec.ImagePullSecrets = append(spec.ImagePullSecrets, s.ImagePullSecrets...)
	if len(s.NodeSelector) > 0 {
		spec.NodeSelector = maps.Clone(s.NodeSelector)
	}
	spec.Tolerations = append(spec.Tolerations, s.Tolerations...)
	if s.Affinity != nil {
		spec.Affinity = s.Affinity.DeepCopy()
	}
	spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, s.TopologySpreadConstraints...)
	if s.PriorityClassName != "" {
		spec.PriorityClassName = s.PriorityClassName
	}
}
