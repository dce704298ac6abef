package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

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
	// mcpPreStopSleepSeconds: kube-proxy learns of a terminating pod a moment
	// after it is marked for deletion.
	mcpPreStopSleepSeconds = 5
)

// MCPServerDefaults come from the manager's flags. They, not the MCPServer's
// author, decide what the pods run and where they may send the key they are
// given: anyone allowed to create an MCPServer must not gain a Deployment
// running code or reaching an address of their choosing.
type MCPServerDefaults struct {
	// Image every MCP server runs.
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// APIBaseURL is used when spec.apiBaseURL is empty: the in-cluster API.
	// It is always allowed.
	APIBaseURL string
	// AllowedAPIBaseURLs are the other addresses spec.apiBaseURL may name.
	AllowedAPIBaseURLs []string
	// Pod is the mcpServer section of --pod-config; its image and pull
	// policy win over the fields above.
	Pod PodSettings
}

func mcpPort(m *posturev1.MCPServer) int32 {
	if m.Spec.Port > 0 {
		return m.Spec.Port
	}
	return defaultMCPPort
}

// MCPServerImage is the image the Deployment runs, "" when none is configured.
func MCPServerImage(d MCPServerDefaults) string {
	if d.Pod.Image != "" {
		return d.Pod.Image
	}
	return d.Image
}

// MCPAPIBaseURL is the API address the server is to call and whether the
// operator allows it. The comparison is exact: a look-alike host, another
// scheme or path is a different address.
func MCPAPIBaseURL(m *posturev1.MCPServer, d MCPServerDefaults) (string, bool) {
	u := m.Spec.APIBaseURL
	if u == "" || u == d.APIBaseURL {
		return d.APIBaseURL, true
	}
	return u, slices.Contains(d.AllowedAPIBaseURLs, u)
}

// ParseAPIBaseURLs reads a comma-separated list of absolute http(s) URLs, so
// that a typo in the operator's allow-list fails at start, not at the first
// MCPServer that names the intended address.
func ParseAPIBaseURLs(list string) ([]string, error) {
	var out []string
	for i, raw := range strings.Split(list, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("entry %d %q: %w", i+1, s, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("entry %d %q: want an absolute http or https URL without user, query or fragment, such as http://posture-api.posture-system.svc/api/v1", i+1, s)
		}
		out = append(out, s)
	}
	return out, nil
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
// The caller checks MCPAPIBaseURL first: the builder does not refuse.
func BuildMCPPodTemplate(m *posturev1.MCPServer, d MCPServerDefaults) corev1.PodTemplateSpec {
	apiBaseURL, _ := MCPAPIBaseURL(m, d)
	resources := m.Spec.Resources
	if resources.Requests == nil && resources.Limits == nil && d.Pod.Resources != nil {
		resources = *d.Pod.Resources
	}
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
	if d.Pod.ImagePullPolicy != "" {
		pullPolicy = d.Pod.ImagePullPolicy
	}
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
				Image:           MCPServerImage(d),
				ImagePullPolicy: pullPolicy,
				Args: []string{
					"--transport=http",
					"--addr=:" + strconv.Itoa(mcpContainerPort),
					"--api-base-url=" + apiBaseURL,
					"--log-format=json",
				},
				Env:            env,
				Ports:          []corev1.ContainerPort{{Name: MCPPortName, ContainerPort: mcpContainerPort, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: probe(5, 3),
				LivenessProbe:  probe(10, 6),
				// Serve on while the Service's endpoints drop a pod marked
				// for deletion; SIGTERM, which closes the listener, comes after.
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: mcpPreStopSleepSeconds}}},
				Resources: resources,
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
	applyPodSettings(&tpl, d.Pod)
	// Hashed after the settings are applied: a new toleration or pull
	// secret in the install rolls the servers like a new image does.
	hash := hashPodTemplate(tpl)
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	tpl.Annotations[AnnotationConfigHash] = hash
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
