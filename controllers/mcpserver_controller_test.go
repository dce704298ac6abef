package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/testenv"
)

var mcpDefaults = controllers.MCPServerDefaults{
	Image:              "registry.example/posture-mcp:1.0.0",
	APIBaseURL:         "http://posture-api.posture-system.svc:8080/api/v1",
	AllowedAPIBaseURLs: []string{"https://posture.example/api/v1"},
}

func startMCPController(t *testing.T) {
	t.Helper()
	startManager(t, "default", func(mgr ctrl.Manager) error {
		return (&controllers.MCPServerReconciler{Client: mgr.GetClient(), Defaults: mcpDefaults, Recorder: mgr.GetEventRecorder("posture-mcpserver"), RecheckInterval: 200 * time.Millisecond}).SetupWithManager(mgr)
	})
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, what, cond)
}

func getDeployment(t *testing.T, ns, name string) (*appsv1.Deployment, bool) {
	t.Helper()
	var dep appsv1.Deployment
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &dep)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return &dep, true
}

func hashOf(dep *appsv1.Deployment) string {
	return dep.Spec.Template.Annotations[controllers.AnnotationConfigHash]
}

func TestMCPServerCreatesDeploymentAndService(t *testing.T) {
	startMCPController(t)
	ctx := context.Background()
	ns := newNamespace(t, "mcp")
	m := &posturev1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns},
		Spec: posturev1.MCPServerSpec{APIKeySecretRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "mcp-default-key"}, Key: "api-key",
		}},
	}
	if err := k8s.Create(ctx, m); err != nil {
		t.Fatal(err)
	}

	var dep *appsv1.Deployment
	eventually(t, "the Deployment", func() (bool, string) {
		d, ok := getDeployment(t, ns, "tools")
		dep = d
		return ok, "absent"
	})
	var svc corev1.Service
	eventually(t, "the Service", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &svc)
		return err == nil, "get: " + errString(err)
	})

	// Owned with controller=true and blockOwnerDeletion: that is what makes the
	// garbage collector delete both with the MCPServer (envtest runs no GC).
	for _, obj := range []client.Object{dep, &svc} {
		refs := obj.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != m.UID || refs[0].Kind != "MCPServer" ||
			!ptr.Deref(refs[0].Controller, false) || !ptr.Deref(refs[0].BlockOwnerDeletion, false) {
			t.Errorf("%T owner references %+v; want the MCPServer as controller with blockOwnerDeletion", obj, refs)
		}
	}

	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %v; with spec.replicas unset the API server's default (1) must stand", dep.Spec.Replicas)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != mcpDefaults.Image {
		t.Errorf("image %q, want the manager's default %q", c.Image, mcpDefaults.Image)
	}
	if len(c.Env) != 1 || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.SecretKeyRef == nil || c.Env[0].ValueFrom.SecretKeyRef.Name != "mcp-default-key" {
		t.Errorf("env %+v: want the default key by reference to Secret mcp-default-key", c.Env)
	}
	if !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) || !ptr.Deref(dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot, false) {
		t.Error("pod security settings were lost on the way to the API server")
	}
	if hashOf(dep) == "" {
		t.Error("no config hash on the pod template")
	}
	if svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("service ports %+v, want 8080 -> http (CRD default port)", svc.Spec.Ports)
	}

	// No kubelet and no Deployment controller here: Ready must say it waits.
	var got posturev1.MCPServer
	eventually(t, "status", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
		return c != nil && got.Status.ObservedGeneration == got.Generation, "status " + describe(got.Status)
	})
	if want := "http://tools." + ns + ".svc:8080/mcp"; got.Status.URL != want {
		t.Errorf("status.url %q, want %q", got.Status.URL, want)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != controllers.ReasonMCPProgressing ||
		!strings.Contains(ready.Message, "waiting for") || !strings.Contains(ready.Message, "never runs the pods") {
		t.Errorf("Ready = %s/%s %q; want False/Progressing saying what it waits for and why it never comes here", ready.Status, ready.Reason, ready.Message)
	}

	// The Deployment controller of a real cluster reports available pods:
	// then, and only then, the server is Ready.
	dep, _ = getDeployment(t, ns, "tools")
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := k8s.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Ready=True after the pods became available", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && got.Status.ReadyReplicas == 1, describe(got.Status)
	})
}

func TestMCPServerConfigChangeRollsOutAndKeepsHPAReplicas(t *testing.T) {
	startMCPController(t)
	ctx := context.Background()
	ns := newNamespace(t, "mcp")
	m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns}}
	if err := k8s.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	eventually(t, "the Deployment", func() (bool, string) {
		d, ok := getDeployment(t, ns, "tools")
		dep = d
		return ok, "absent"
	})
	firstHash := hashOf(dep)

	// An autoscaler sets replicas through the scale subresource.
	scale := &autoscalingv1.Scale{}
	if err := k8s.SubResource("scale").Get(ctx, dep, scale); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 5
	if err := k8s.SubResource("scale").Update(ctx, dep, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}

	// A configuration change: another allowed API address → new hash → new template.
	patchSpec(t, m, func(m *posturev1.MCPServer) { m.Spec.APIBaseURL = "https://posture.example/api/v1" })
	eventually(t, "the new address rolled into the template", func() (bool, string) {
		d, _ := getDeployment(t, ns, "tools")
		dep = d
		args := d.Spec.Template.Spec.Containers[0].Args
		return slices.Contains(args, "--api-base-url=https://posture.example/api/v1"), fmt.Sprintf("args %q", args)
	})
	if hashOf(dep) == firstHash {
		t.Errorf("config hash stayed %s after the API address changed: pods would not roll", firstHash)
	}
	if got := ptr.Deref(dep.Spec.Replicas, -1); got != 5 {
		t.Errorf("replicas %d after reconciling; with spec.replicas unset the autoscaler's 5 must stay", got)
	}

	// An explicit spec.replicas is the spec's to decide.
	patchSpec(t, m, func(m *posturev1.MCPServer) { m.Spec.Replicas = ptr.To[int32](2) })
	eventually(t, "replicas from the spec", func() (bool, string) {
		d, _ := getDeployment(t, ns, "tools")
		return ptr.Deref(d.Spec.Replicas, -1) == 2, "replicas " + describeReplicas(d)
	})
	d, _ := getDeployment(t, ns, "tools")
	if hashOf(d) != hashOf(dep) {
		t.Errorf("a replicas change rolled the template (%s -> %s); scaling must not restart pods", hashOf(dep), hashOf(d))
	}

	// Drift: someone edits the template by hand; the next reconcile restores it.
	orig := d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Image = "evil/image:latest"
	if err := k8s.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hand edit reverted", func() (bool, string) {
		d, _ := getDeployment(t, ns, "tools")
		return d.Spec.Template.Spec.Containers[0].Image == mcpDefaults.Image, "image " + d.Spec.Template.Spec.Containers[0].Image
	})
}

func TestMCPServerWithoutImageSaysSo(t *testing.T) {
	startManager(t, "default", func(mgr ctrl.Manager) error {
		return (&controllers.MCPServerReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	ctx := context.Background()
	ns := newNamespace(t, "mcp")
	m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns}}
	if err := k8s.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	var got posturev1.MCPServer
	eventually(t, "a Ready condition", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady) != nil, describe(got.Status)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != controllers.ReasonMCPNoImage || !strings.Contains(c.Message, "--mcp-image") {
		t.Errorf("Ready %s/%s %q; want False/ImageNotSet naming the fix", c.Status, c.Reason, c.Message)
	}
	if _, ok := getDeployment(t, ns, "tools"); ok {
		t.Error("a Deployment was created without an image")
	}
}

// patchSpec changes the spec with a merge patch, which the controller's
// concurrent status writes cannot make conflict.
func patchSpec(t *testing.T, m *posturev1.MCPServer, change func(*posturev1.MCPServer)) {
	t.Helper()
	orig := m.DeepCopy()
	change(m)
	if err := k8s.Patch(context.Background(), m, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func describe(s posturev1.MCPServerStatus) string {
	var b strings.Builder
	b.WriteString("url=" + s.URL)
	for _, c := range s.Conditions {
		b.WriteString(" " + c.Type + "=" + string(c.Status) + "/" + c.Reason + ": " + c.Message)
	}
	return b.String()
}

func describeReplicas(d *appsv1.Deployment) string {
	if d.Spec.Replicas == nil {
		return "nil"
	}
	return fmt.Sprint(*d.Spec.Replicas)
}

// The MCPServer's author chooses neither what the pods run nor where they
// send the key they are given: the image is always the operator's, and an
// address off the operator's allow-list gets no Deployment at all, neither
// on create nor by an update of a running server.
func TestMCPServerAuthorCannotChooseImageOrAddress(t *testing.T) {
	startMCPController(t)
	ctx := context.Background()
	const attackerURL = "http://collector.attacker.example/api/v1"
	cases := []struct {
		name string
		// spec is applied as sent by a client, so fields the type no longer
		// has (spec.image) reach the API server as an attacker would send them.
		spec map[string]any
		// then, when set, is applied after the Deployment exists.
		then           map[string]any
		wantDeployment bool
		wantArg        string
		wantReason     string
	}{
		{
			name:           "image in the spec is ignored",
			spec:           map[string]any{"image": "registry.attacker.example/printenv"},
			wantDeployment: true,
			wantArg:        "--api-base-url=" + mcpDefaults.APIBaseURL,
			wantReason:     controllers.ReasonMCPProgressing,
		},
		{
			name:       "address off the allow-list on create",
			spec:       map[string]any{"apiBaseURL": attackerURL, "apiKeySecretRef": map[string]any{"name": "demo-admin-password", "key": "password"}},
			wantReason: controllers.ReasonMCPAPIBaseURLNotAllowed,
		},
		{
			name:           "address off the allow-list on update",
			spec:           map[string]any{},
			then:           map[string]any{"apiBaseURL": attackerURL, "image": "registry.attacker.example/printenv"},
			wantDeployment: true,
			wantArg:        "--api-base-url=" + mcpDefaults.APIBaseURL,
			wantReason:     controllers.ReasonMCPAPIBaseURLNotAllowed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, "mcp")
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": posturev1.GroupVersion.String(), "kind": "MCPServer",
				"metadata": map[string]any{"name": "tools", "namespace": ns},
				"spec":     tc.spec,
			}}
			if err := k8s.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: ns, Name: "tools"}
			if tc.then != nil {
				eventually(t, "the first Deployment", func() (bool, string) {
					_, ok := getDeployment(t, ns, "tools")
					return ok, "absent"
				})
				patch, err := json.Marshal(map[string]any{"spec": tc.then})
				if err != nil {
					t.Fatal(err)
				}
				if err := k8s.Patch(ctx, &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Fatal(err)
				}
			}
			var got posturev1.MCPServer
			eventually(t, "Ready for the latest generation", func() (bool, string) {
				if err := k8s.Get(ctx, key, &got); err != nil {
					t.Fatal(err)
				}
				c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
				return c != nil && c.ObservedGeneration == got.Generation && c.Reason == tc.wantReason, describe(got.Status)
			})
			c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
			if c.Status != metav1.ConditionFalse {
				t.Errorf("Ready %s, want False", c.Status)
			}
			if tc.wantReason == controllers.ReasonMCPAPIBaseURLNotAllowed &&
				(!strings.Contains(c.Message, attackerURL) || !strings.Contains(c.Message, "--mcp-allowed-api-base-urls")) {
				t.Errorf("Ready message %q: want the refused address and the flag that allows addresses", c.Message)
			}

			dep, ok := getDeployment(t, ns, "tools")
			if ok != tc.wantDeployment {
				t.Fatalf("Deployment exists=%v, want %v", ok, tc.wantDeployment)
			}
			if !ok {
				return
			}
			ctr := dep.Spec.Template.Spec.Containers[0]
			if ctr.Image != mcpDefaults.Image {
				t.Errorf("image %q; want the operator's %q whatever the spec says", ctr.Image, mcpDefaults.Image)
			}
			if !slices.Contains(ctr.Args, tc.wantArg) || slices.Contains(ctr.Args, "--api-base-url="+attackerURL) {
				t.Errorf("args %q; want %s and never the refused address", ctr.Args, tc.wantArg)
			}
		})
	}
}

// TestMCPServerDoesNotTakeOverOthersObjects: the operator writes an
// MCPServer's Deployment and Service with its own rights, so an MCPServer
// named like an existing Service or Deployment must not rewrite it (its
// selector and ports sent to MCP pods) nor own it (deleted with the
// MCPServer): its author may hold no right on either.
func TestMCPServerDoesNotTakeOverOthersObjects(t *testing.T) {
	startMCPController(t)
	ctx := context.Background()
	for _, kind := range []string{"Service", "Deployment"} {
		t.Run(kind, func(t *testing.T) {
			ns := newNamespace(t, "mcp-takeover")
			labels := map[string]string{"app": "billing-api"}
			var existing client.Object
			if kind == "Service" {
				existing = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "billing-api", Namespace: ns},
					Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}}
			} else {
				existing = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "billing-api", Namespace: ns},
					Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "billing:1"}}}}}}
			}
			if err := k8s.Create(ctx, existing); err != nil {
				t.Fatal(err)
			}
			m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "billing-api", Namespace: ns}}
			if err := k8s.Create(ctx, m); err != nil {
				t.Fatal(err)
			}
			var got posturev1.MCPServer
			eventually(t, "Ready=False NameConflict", func() (bool, string) {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
					t.Fatal(err)
				}
				c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controllers.ReasonMCPNameConflict, describe(got.Status)
			})
			// A reconcile of a later generation takes nothing over either.
			for attempt := 0; ; attempt++ {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
					t.Fatal(err)
				}
				replicas := int32(2)
				if got.Spec.Replicas != nil {
					replicas = *got.Spec.Replicas + 1
				}
				got.Spec.Replicas = &replicas
				err := k8s.Update(ctx, &got)
				if err == nil {
					break
				}
				if !apierrors.IsConflict(err) || attempt == 10 {
					t.Fatal(err)
				}
			}
			generation := got.Generation
			eventually(t, "the next generation observed, still NameConflict", func() (bool, string) {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
					t.Fatal(err)
				}
				c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
				return got.Status.ObservedGeneration >= generation && c != nil && c.Reason == controllers.ReasonMCPNameConflict, describe(got.Status)
			})
			switch kind {
			case "Service":
				var svc corev1.Service
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(existing), &svc); err != nil {
					t.Fatal(err)
				}
				if svc.Spec.Selector["app"] != "billing-api" || len(svc.Spec.Selector) != 1 || svc.Spec.Ports[0].Port != 443 || len(svc.OwnerReferences) != 0 {
					t.Errorf("the Service was taken over: selector %v, ports %v, owners %v", svc.Spec.Selector, svc.Spec.Ports, svc.OwnerReferences)
				}
				if _, ok := getDeployment(t, ns, "billing-api"); ok {
					t.Errorf("a Deployment was created for an MCPServer whose Service name is taken")
				}
			case "Deployment":
				dep, _ := getDeployment(t, ns, "billing-api")
				if dep.Spec.Template.Spec.Containers[0].Image != "billing:1" || len(dep.OwnerReferences) != 0 {
					t.Errorf("the Deployment was taken over: image %s, owners %v", dep.Spec.Template.Spec.Containers[0].Image, dep.OwnerReferences)
				}
			}
		})
	}
}
