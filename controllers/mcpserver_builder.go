package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Names of the MCP server's objects and settings.
const (
	// AnnotationConfigHash on the pod template carries the hash of everything
	// the pods are built from: a new hash is a new template, hence a rollout.
	AnnotationConfigHash = "posture.dev/config-hash"
	LabelName            = "app.kubernetes.io/name"
	LabelInstance        = "app.kubernetes.io/instance"
	MCPServerAppName     = "posture-mcp-server"
	MCPContainerName     = "mcp-server"
	MCPPortName          = "http"
	// EnvMCPDefaultAPIKey is how the optional default key reaches the server
	// (cmd/mcp-server reads it); its value comes from the referenced Secret.
	EnvMCPDefaultAPIKey = "POSTURE_MCP_DEFAULT_API_KEY"
	defaultMCPPort      = 8080
	// mcpContainerPort is fixed: the Service maps spec.port onto it, so a
	// port below 1024 needs no privilege in a non-root container.
	mcpContainerPort = 8080
)

// MCPServerDefaults come from the manager's flags.
type MCPServerDefaults struct {
	// Image is used when spec.image is empty.
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// APIBaseURL is used when spec.apiBaseURL is empty: the in-cluster API.
	APIBaseURL string
}

func mcpPort(m *posturev1.MCPServer) int32 {
	if m.Spec.Port > 0 {
		return m.Spec.Port
	}
	return defaultMCPPort
}

// MCPServerImage is the image the Deployment runs, "" when none is known.
func MCPServerImage(m *posturev1.MCPServer, d MCPServerDefaults) string {
	if m.Spec.Image != "" {
		return m.Spec.Image
	}
	return d.Image
}

func mcpAPIBaseURL(m *posturev1.MCPServer, d MCPServerDefaults) string {
	if m.Spec.APIBaseURL != "" {
		return m.Spec.APIBaseURL
	}
	return d.APIBaseURL
}

// MCPServerURL is the in-cluster address clients use.
func MCPServerURL(m *posturev1.MCPServer) string {
	return fmt.Sprintf("http://%s.%s.svc:%d/mcp", m.Name, m.Namespace, mcpPort(m))
}

// MCPSelectorLabels select the server's pods; they never change, because a
// Deployment's selector is immutable.
func MCPSelectorLabels(m *posturev1.MCPServer) map[string]string {
	return map[string]string{LabelName: MCPServerAppName, LabelInstance: m.Name}
}

// MCPLabels are set on every object built for an MCPServer.
func MCPLabels(m *posturev1.MCPServer) map[string]string {
	l := MCPSelectorLabels(m)
	l[posturev1.LabelManagedBy] = posturev1.ManagedByValue
	l[LabelComponent] = "mcp-server"
	return l
}

// BuildMCPPodTemplate is the pod template with its config-hash annotation.
func BuildMCPPodTemplate(m *posturev1.MCPServer, d MCPServerDefaults) corev1.PodTemplateSpec {
	resources := m.Spec.Resources
	if resources.Requests == nil && resources.Limits == nil {
		resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			// upload_report holds one MCP message (at most 32 MiB by default) in memory.
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
	}
	var env []corev1.EnvVar
	if ref := m.Spec.APIKeySecretRef; ref != nil {
		// By reference: the operator never reads the key, the kubelet does.
		env = append(env, corev1.EnvVar{Name: EnvMCPDefaultAPIKey, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref.LocalObjectReference, Key: ref.Key, Optional: ref.Optional},
		}})
	}
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString(MCPPortName), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2, SuccessThreshold: 1,
		}
	}
	pullPolicy := d.ImagePullPolicy
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: MCPLabels(m)},
		Spec: corev1.PodSpec{
			// The server talks to the Posture API over HTTP, never to Kubernetes.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				RunAsGroup:     ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            MCPContainerName,
				Image:           MCPServerImage(m, d),
				ImagePullPolicy: pullPolicy,
				Args: []string{
					"--transport=http",
					"--addr=:" + strconv.Itoa(mcpContainerPort),
					"--api-base-url=" + mcpAPIBaseURL(m, d),
					"--log-format=json",
				},
				Env:            env,
				Ports:          []corev1.ContainerPort{{Name: MCPPortName, ContainerPort: mcpContainerPort, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: probe(5, 3),
				LivenessProbe:  probe(10, 6),
				Resources:      resources,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					RunAsNonRoot:             ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
	tpl.Annotations = map[string]string{AnnotationConfigHash: hashPodTemplate(tpl)}
	return tpl
}

// hashPodTemplate hashes the template as built (before the annotation is
// added), so any change of image, args, env, port, resources or security
// settings yields a new hash.
func hashPodTemplate(tpl corev1.PodTemplateSpec) string {
	b, err := json.Marshal(tpl)
	if err != nil {
		panic(fmt.Sprintf("marshal pod template: %v", err)) // plain structs always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// BuildMCPDeployment is the pure builder of the Deployment. Replicas is
// only set when spec.replicas is: otherwise it belongs to whoever scales
// the Deployment (an HPA, or a person).
func BuildMCPDeployment(m *posturev1.MCPServer, d MCPServerDefaults) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: MCPLabels(m)},
		Spec: appsv1.DeploymentSpec{
			Replicas: m.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: MCPSelectorLabels(m)},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				// Stateless: start the new pod before stopping an old one.
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](5),
			Template:             BuildMCPPodTemplate(m, d),
		},
	}
}

// BuildMCPService is the pure builder of the Service in front of the pods.
func BuildMCPService(m *posturev1.MCPServer) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: MCPLabels(m)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: MCPSelectorLabels(m),
			Ports: []corev1.ServicePort{{
				Name: MCPPortName, Port: mcpPort(m), TargetPort: intstr.FromString(MCPPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}
