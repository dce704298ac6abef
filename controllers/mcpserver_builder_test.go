package controllers

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

var testDefaults = MCPServerDefaults{
	Image:              "registry.example/posture-mcp:1.0.0",
	APIBaseURL:         "http://posture-api.posture-system.svc:8080/api/v1",
	AllowedAPIBaseURLs: []string{"https://api.example/api/v1"},
}

func mcpServer(mod func(*posturev1.MCPServer)) *posturev1.MCPServer {
	m := &posturev1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "agents"},
		Spec:       posturev1.MCPServerSpec{Transport: "http", Port: 8080},
	}
	if mod != nil {
		mod(m)
	}
	return m
}

func TestBuildMCPDeploymentDefaults(t *testing.T) {
	m := mcpServer(nil)
	dep := BuildMCPDeployment(m, testDefaults)
	if dep.Name != "tools" || dep.Namespace != "agents" {
		t.Fatalf("deployment %s/%s, want agents/tools", dep.Namespace, dep.Name)
	}
	if dep.Spec.Replicas != nil {
		t.Errorf("replicas = %d with spec.replicas unset; must stay nil so an autoscaler owns it", *dep.Spec.Replicas)
	}
	sel := dep.Spec.Selector.MatchLabels
	for k, v := range sel {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("pod template label %s=%q does not match selector %q", k, dep.Spec.Template.Labels[k], v)
		}
	}
	if dep.Labels[posturev1.LabelManagedBy] != posturev1.ManagedByValue {
		t.Errorf("deployment lacks %s=%s (the manager's cache selects on it)", posturev1.LabelManagedBy, posturev1.ManagedByValue)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != testDefaults.Image {
		t.Errorf("image %q, want the default %q", c.Image, testDefaults.Image)
	}
	wantArgs := []string{"--transport=http", "--addr=:8080", "--api-base-url=" + testDefaults.APIBaseURL, "--log-format=json"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if len(c.Env) != 0 {
		t.Errorf("env %v without apiKeySecretRef; the default key must be off by default", c.Env)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("readiness probe %+v, want GET /healthz", c.ReadinessProbe)
	}

	// Pod security of the issue: non-root, read-only root, no privileges, no token.
	checks := []struct {
		what string
		ok   bool
	}{
		{"automountServiceAccountToken false", ptr.Deref(pod.AutomountServiceAccountToken, true) == false},
		{"pod runAsNonRoot", pod.SecurityContext != nil && ptr.Deref(pod.SecurityContext.RunAsNonRoot, false)},
		{"pod seccomp RuntimeDefault", pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil && pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"container readOnlyRootFilesystem", c.SecurityContext != nil && ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false)},
		{"container allowPrivilegeEscalation false", c.SecurityContext != nil && c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation},
		{"container drops ALL capabilities", c.SecurityContext != nil && c.SecurityContext.Capabilities != nil && slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"container runAsNonRoot", c.SecurityContext != nil && ptr.Deref(c.SecurityContext.RunAsNonRoot, false)},
		{"non-root uid", pod.SecurityContext != nil && ptr.Deref(pod.SecurityContext.RunAsUser, 0) != 0},
		{"memory limit", !c.Resources.Limits.Memory().IsZero()},
	}
	for _, chk := range checks {
		if !chk.ok {
			t.Errorf("pod security: want %s", chk.what)
		}
	}
	if dep.Spec.Template.Annotations[AnnotationConfigHash] == "" {
		t.Error("pod template has no config hash annotation")
	}
}

func TestBuildMCPDeploymentSpecFields(t *testing.T) {
	secretRef := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "mcp-key"}, Key: "api-key"}
	m := mcpServer(func(m *posturev1.MCPServer) {
		m.Spec.Replicas = ptr.To[int32](3)
		m.Spec.APIBaseURL = "https://api.example/api/v1"
		m.Spec.Port = 443
		m.Spec.APIKeySecretRef = secretRef
		m.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	})
	dep := BuildMCPDeployment(m, testDefaults)
	if ptr.Deref(dep.Spec.Replicas, -1) != 3 {
		t.Errorf("replicas %v, want 3 from the spec", dep.Spec.Replicas)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != testDefaults.Image {
		t.Errorf("image %q, want the operator's %q", c.Image, testDefaults.Image)
	}
	if !slices.Contains(c.Args, "--api-base-url=https://api.example/api/v1") {
		t.Errorf("args %q lack spec.apiBaseURL", c.Args)
	}
	// A privileged Service port must not make the non-root container bind it.
	if c.Ports[0].ContainerPort != 8080 || !slices.Contains(c.Args, "--addr=:8080") {
		t.Errorf("container listens on %d (%q); want the fixed 8080 behind any Service port", c.Ports[0].ContainerPort, c.Args)
	}
	if len(c.Env) != 1 || c.Env[0].Name != EnvMCPDefaultAPIKey || c.Env[0].Value != "" ||
		c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.SecretKeyRef == nil ||
		c.Env[0].ValueFrom.SecretKeyRef.Name != "mcp-key" || c.Env[0].ValueFrom.SecretKeyRef.Key != "api-key" {
		t.Errorf("env %+v, want %s from Secret mcp-key key api-key, by reference", c.Env, EnvMCPDefaultAPIKey)
	}
	if got := c.Resources.Limits.Memory().String(); got != "1Gi" {
		t.Errorf("memory limit %s, want spec.resources' 1Gi", got)
	}

	svc := BuildMCPService(m)
	want := corev1.ServicePort{Name: "http", Port: 443, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0] != want {
		t.Errorf("service ports %+v, want %+v", svc.Spec.Ports, want)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service type %s, want ClusterIP", svc.Spec.Type)
	}
	for k, v := range MCPSelectorLabels(m) {
		if svc.Spec.Selector[k] != v {
			t.Errorf("service selector %v lacks %s=%s", svc.Spec.Selector, k, v)
		}
	}
	if got := MCPServerURL(m); got != "http://tools.agents.svc:443/mcp" {
		t.Errorf("URL %s", got)
	}
}

// Every input of the pods changes the hash (a rollout); replicas, which only
// scale, do not.
func TestMCPConfigHash(t *testing.T) {
	base := BuildMCPDeployment(mcpServer(nil), testDefaults).Spec.Template.Annotations[AnnotationConfigHash]
	again := BuildMCPDeployment(mcpServer(nil), testDefaults).Spec.Template.Annotations[AnnotationConfigHash]
	if base != again {
		t.Fatalf("hash is not stable: %s then %s", base, again)
	}
	cases := []struct {
		name     string
		mod      func(*posturev1.MCPServer)
		defaults *MCPServerDefaults
		changes  bool
	}{
		{"default image", nil, &MCPServerDefaults{Image: "other:2", APIBaseURL: testDefaults.APIBaseURL}, true},
		{"api base url", func(m *posturev1.MCPServer) { m.Spec.APIBaseURL = "https://api.example/api/v1" }, nil, true},
		{"api key secret", func(m *posturev1.MCPServer) {
			m.Spec.APIKeySecretRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "k"}, Key: "api-key"}
		}, nil, true},
		{"resources", func(m *posturev1.MCPServer) {
			m.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}, nil, true},
		{"replicas", func(m *posturev1.MCPServer) { m.Spec.Replicas = ptr.To[int32](4) }, nil, false},
		{"service port", func(m *posturev1.MCPServer) { m.Spec.Port = 9000 }, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := testDefaults
			if tc.defaults != nil {
				d = *tc.defaults
			}
			got := BuildMCPDeployment(mcpServer(tc.mod), d).Spec.Template.Annotations[AnnotationConfigHash]
			if (got != base) != tc.changes {
				t.Errorf("hash %s vs base %s: changed=%v, want %v", got, base, got != base, tc.changes)
			}
		})
	}
}

func TestDeploymentReadiness(t *testing.T) {
	dep := func(replicas *int32, gen, observed int64, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tools", Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: replicas}}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, AvailableReplicas: available, Conditions: conds}
		return d
	}
	// reconciling and stalled are what kstatus reads: InProgress while the
	// Deployment moves, Failed once it gave up, Current otherwise.
	cases := []struct {
		name                 string
		dep                  *appsv1.Deployment
		status               metav1.ConditionStatus
		reason               string
		message              string
		reconciling, stalled bool
	}{
		{"never observed (bare control plane)", dep(nil, 1, 0, 0, 0), metav1.ConditionFalse, ReasonMCPProgressing, "waiting for the Deployment controller", true, false},
		{"observed, no pods yet", dep(ptr.To[int32](2), 1, 1, 2, 0), metav1.ConditionFalse, ReasonMCPProgressing, "0 of 2 available", true, false},
		{"rolling out", dep(ptr.To[int32](2), 2, 2, 1, 2), metav1.ConditionFalse, ReasonMCPProgressing, "2 of 2 available", true, false},
		{"available", dep(ptr.To[int32](2), 2, 2, 2, 2), metav1.ConditionTrue, ReasonMCPAvailable, "2 of 2 replicas available", false, false},
		{"nil replicas means one", dep(nil, 1, 1, 1, 1), metav1.ConditionTrue, ReasonMCPAvailable, "1 of 1", false, false},
		// Declared so: reconciled as declared.
		{"scaled to zero", dep(ptr.To[int32](0), 1, 1, 0, 0), metav1.ConditionTrue, ReasonMCPScaledDown, "0 replicas", false, false},
		{"past its progress deadline", dep(nil, 1, 1, 1, 0, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Message: `ReplicaSet "tools-1" has timed out progressing.`}),
			"", ReasonMCPStalled, "timed out progressing", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := deploymentReadiness(tc.dep)
			if v.ready != tc.status || v.reason != tc.reason || !strings.Contains(v.message, tc.message) || v.reconciling != tc.reconciling || v.stalled != tc.stalled {
				t.Errorf("got %+v; want %s/%s containing %q, reconciling %v, stalled %v", v, tc.status, tc.reason, tc.message, tc.reconciling, tc.stalled)
			}
		})
	}
}

func TestMCPAPIBaseURLAllowList(t *testing.T) {
	cases := []struct {
		name    string
		spec    string
		want    string
		allowed bool
	}{
		{"empty takes the operator's address", "", testDefaults.APIBaseURL, true},
		{"the operator's address named explicitly", testDefaults.APIBaseURL, testDefaults.APIBaseURL, true},
		{"on the allow-list", "https://api.example/api/v1", "https://api.example/api/v1", true},
		{"attacker's collector", "http://collector.attacker.example/api/v1", "http://collector.attacker.example/api/v1", false},
		{"another scheme of an allowed address", "http://api.example/api/v1", "http://api.example/api/v1", false},
		{"another path of an allowed address", "https://api.example/api/v1/", "https://api.example/api/v1/", false},
		{"look-alike host", "https://api.example.attacker.example/api/v1", "https://api.example.attacker.example/api/v1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mcpServer(func(m *posturev1.MCPServer) { m.Spec.APIBaseURL = tc.spec })
			got, ok := MCPAPIBaseURL(m, testDefaults)
			if got != tc.want || ok != tc.allowed {
				t.Errorf("MCPAPIBaseURL(%q) = %q, %v; want %q, %v", tc.spec, got, ok, tc.want, tc.allowed)
			}
		})
	}
}

func TestParseAPIBaseURLs(t *testing.T) {
	cases := []struct {
		list    string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{" http://a.svc/api/v1 , https://b.example/api/v1,", []string{"http://a.svc/api/v1", "https://b.example/api/v1"}, ""},
		{"a.svc/api/v1", nil, `entry 1 "a.svc/api/v1"`},
		{"http://ok.svc/api/v1,ftp://b/api/v1", nil, `entry 2 "ftp://b/api/v1"`},
		{"http://user:pw@b/api/v1", nil, "without user"},
		{"http://b/api/v1?x=1", nil, "without user, query"},
		{"http://%zz/api/v1", nil, "entry 1"},
	}
	for _, tc := range cases {
		t.Run(tc.list, func(t *testing.T) {
			got, err := ParseAPIBaseURLs(tc.list)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseAPIBaseURLs(%q) = %q, %v; want an error containing %q", tc.list, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("ParseAPIBaseURLs(%q) = %q, %v; want %q", tc.list, got, err, tc.want)
			}
		})
	}
}
