package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	lua "github.com/yuin/gopher-lua"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/testenv"
)

// gitopsDir holds the health checks shipped for Argo CD and Flux.
const gitopsDir = "../config/gitops"

// argoHealthOf is the Argo CD health a kstatus result corresponds to.
var argoHealthOf = map[kstatus.Status]string{
	kstatus.CurrentStatus:    "Healthy",
	kstatus.InProgressStatus: "Progressing",
	kstatus.FailedStatus:     "Degraded",
}

// healthCase is one kind in one state, reached through the real controllers.
type healthCase struct {
	name string
	kind string
	key  types.NamespacedName
	// reason is the Ready reason that shows the state was reached.
	reason string
	want   kstatus.Status
}

// TestHealthOfEveryKind drives every kind into each of its states through the
// controllers on a real API server, then reads each object's health three
// ways, as the tools that consume it do: kstatus (Flux's default, kubectl
// wait, cli-utils), the shipped Argo CD Lua checks run by gopher-lua (the
// interpreter Argo CD embeds), and the shipped Flux healthCheckExprs run by
// cel-go. All three must say what a user expects.
func TestHealthOfEveryKind(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	jobNS := newNamespace(t, "posture-system")
	stop := startManager(t, jobNS, func(mgr ctrl.Manager) error {
		if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.APIKeyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.ProviderReconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.MCPServerReconciler{Client: mgr.GetClient(), Defaults: mcpDefaults,
			RecheckInterval: 200 * time.Millisecond}).SetupWithManager(mgr); err != nil {
			return err
		}
		// Job executor: with no kubelet a Job never runs, so an ingestion
		// stays processing until the test plays the Job's part.
		return (&controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st,
			Executor: &controllers.JobExecutor{Client: mgr.GetClient(), Config: controllers.WorkerJobConfig{
				Namespace: jobNS, Image: "posture:test", StoreDriver: "postgres", StoreSecret: "posture-store",
			}},
			PollInterval: 100 * time.Millisecond,
			Billing:      &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		}).SetupWithManager(mgr)
	})

	var cases []healthCase
	add := func(name, kind string, obj client.Object, reason string, want kstatus.Status) {
		cases = append(cases, healthCase{name, kind, client.ObjectKeyFromObject(obj), reason, want})
	}

	// Tenants. The first, with a plan limit of one provider, also holds
	// the keys, providers and MCP servers below.
	home := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 1 })
	ns := waitTenant(t, home.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	add("ready", "Tenant", home, controllers.ReasonTenantReady, kstatus.CurrentStatus)
	add("password Secret missing", "Tenant", newTenant(t, func(tn *posturev1.Tenant) {
		tn.Spec.Users[0].PasswordSecretRef = &posturev1.SecretKeyRef{Name: "no-such-secret"}
	}), controllers.ReasonPasswordSecret, kstatus.FailedStatus)
	add("unknown role", "Tenant", newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Users[0].Role = "ghost" }),
		controllers.ReasonUnknownRole, kstatus.FailedStatus)
	add("namespace of another tenant", "Tenant", newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Namespace = ns }),
		controllers.ReasonNamespaceConflict, kstatus.FailedStatus)

	// API keys.
	key := func(name string, mutate func(*posturev1.APIKey)) *posturev1.APIKey {
		return newAPIKey(t, ns, name, mutate)
	}
	past := metav1.NewTime(time.Now().Add(-time.Hour))
	add("active", "APIKey", key("active", nil), controllers.ReasonKeyActive, kstatus.CurrentStatus)
	add("revoked on purpose", "APIKey", key("revoked", func(k *posturev1.APIKey) { k.Spec.Revoked = true }),
		controllers.ReasonKeyRevoked, kstatus.CurrentStatus)
	add("expired", "APIKey", key("expired", func(k *posturev1.APIKey) { k.Spec.ExpiresAt = &past }),
		controllers.ReasonKeyExpired, kstatus.CurrentStatus)
	add("unknown user", "APIKey", key("stranger", func(k *posturev1.APIKey) { k.Spec.User = "nobody@example.com" }),
		controllers.ReasonUserUnknown, kstatus.FailedStatus)

	// Providers: a plan of one, and a namespace without a Tenant. Names
	// order the two of the same creation second.
	add("within the plan", "Provider", newProvider(t, ns, "aws", "111111111111", posturev1.ProviderConnected),
		controllers.ReasonProviderBilled, kstatus.CurrentStatus)
	add("over the plan limit", "Provider", newProvider(t, ns, "aws", "222222222222", posturev1.ProviderConnected),
		controllers.ReasonProviderOverLimit, kstatus.FailedStatus)
	noTenant := newNamespace(t, "no-tenant")
	add("no tenant", "Provider", newProvider(t, noTenant, "gcp", "project-1", posturev1.ProviderConnected),
		controllers.ReasonNoTenant, kstatus.FailedStatus)

	// Mute rules. An expired rule is as declared: Current, like an expired
	// APIKey. (Applying, while a pass runs, is too brief to catch here; a
	// stale generation below reads InProgress the same way.)
	rule := func(ns, name string, mutate func(*posturev1.MuteRule)) *posturev1.MuteRule {
		r := &posturev1.MuteRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: posturev1.MuteRuleSpec{Match: posturev1.MuteMatch{CheckID: "s3_*"}, Reason: "accepted"}}
		if mutate != nil {
			mutate(r)
		}
		if err := k8s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	add("applied", "MuteRule", rule(ns, "applied", nil), controllers.ReasonMuteApplied, kstatus.CurrentStatus)
	add("expired", "MuteRule", rule(ns, "expired", func(r *posturev1.MuteRule) { r.Spec.ExpiresAt = &past }),
		controllers.ReasonMuteExpired, kstatus.CurrentStatus)
	add("invalid glob", "MuteRule", rule(ns, "invalid", func(r *posturev1.MuteRule) { r.Spec.Match.ResourceUID = "arn:[x" }),
		controllers.ReasonMuteInvalid, kstatus.FailedStatus)
	add("no tenant", "MuteRule", rule(noTenant, "orphan", nil), controllers.ReasonNoTenant, kstatus.FailedStatus)

	// MCP servers. Their Deployments' status is the test's to write: there
	// is no Deployment controller here.
	server := func(name string, mutate func(*posturev1.MCPServer)) *posturev1.MCPServer {
		m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: posturev1.MCPServerSpec{Replicas: ptr.To[int32](1)}}
		if mutate != nil {
			mutate(m)
		}
		if err := k8s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	add("rolling out", "MCPServer", server("rolling", nil), controllers.ReasonMCPProgressing, kstatus.InProgressStatus)
	available := server("available", nil)
	deadline := server("deadline", nil)
	add("apiBaseURL not allowed", "MCPServer", server("refused", func(m *posturev1.MCPServer) { m.Spec.APIBaseURL = "https://elsewhere.example/api/v1" }),
		controllers.ReasonMCPAPIBaseURLNotAllowed, kstatus.FailedStatus)
	setDeployment := func(name string, set func(*appsv1.DeploymentStatus)) {
		t.Helper()
		eventually(t, "Deployment "+name+" status written", func() (bool, string) {
			dep, ok := getDeployment(t, ns, name)
			if !ok {
				return false, "no Deployment yet"
			}
			dep.Status.ObservedGeneration = dep.Generation
			set(&dep.Status)
			err := k8s.Status().Update(ctx, dep)
			return err == nil, errString(err)
		})
	}
	setDeployment("available", func(s *appsv1.DeploymentStatus) {
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = 1, 1, 1, 1
	})
	setDeployment("deadline", func(s *appsv1.DeploymentStatus) {
		s.Replicas, s.UpdatedReplicas = 1, 1
		s.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "deadline-1" has timed out progressing.`}}
	})
	add("available", "MCPServer", available, controllers.ReasonMCPAvailable, kstatus.CurrentStatus)
	add("past its progress deadline", "MCPServer", deadline, controllers.ReasonMCPStalled, kstatus.FailedStatus)

	// Ingestions, in a tenant of their own so that billing has room.
	ingTenant := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 0 })
	ingNS := waitTenant(t, ingTenant.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	report := testenv.Fixture("aws_3_records.ocsf.json")
	processing := upload(t, st, ingTenant.Name, ingNS, report)
	completed := upload(t, st, ingTenant.Name, ingNS, report)
	failed := upload(t, st, ingTenant.Name, ingNS, report)
	add("processing", "Ingestion", processing, controllers.ReasonProcessing, kstatus.InProgressStatus)
	add("completed", "Ingestion", completed, controllers.ReasonCompleted, kstatus.CurrentStatus)
	add("failed", "Ingestion", failed, controllers.ReasonFailed, kstatus.FailedStatus)
	for _, ing := range []*posturev1.Ingestion{completed, failed} {
		waitPhase(t, ing, posturev1.IngestionProcessing)
	}
	// What the completed one's pod would do: run the worker, then succeed.
	w := &ingest.Worker{Store: st, Log: ctrl.Log}
	if err := w.Run(ctx, ingest.Attempt{Tenant: ingTenant.Name, IngestionID: completed.Name, BlobID: completed.Spec.Source.Upload.BlobID,
		Attempt: 1, Total: int(completed.Spec.RecordCount)}); err != nil {
		t.Fatal(err)
	}
	finishJob(t, waitJob(t, jobNS, completed), true)
	finishJob(t, waitJob(t, jobNS, failed), false)

	argo, flux := loadArgoChecks(t), loadFluxChecks(t)
	for _, tc := range cases {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			u := waitHealthState(t, tc)
			checkHealth(t, u, tc.want, argo[tc.kind], flux[tc.kind])
		})
	}

	// A spec the controller has not seen yet is InProgress, whatever its
	// conditions say: stop the controllers, then change each kind's spec.
	// (An Ingestion's spec is immutable, so it cannot be stale.)
	stop()
	for _, s := range []struct {
		kind   string
		obj    client.Object
		change func(client.Object)
	}{
		{"Tenant", &posturev1.Tenant{}, func(o client.Object) { o.(*posturev1.Tenant).Spec.Subscription.Plan = "bigger" }},
		{"APIKey", &posturev1.APIKey{}, func(o client.Object) {
			later := metav1.NewTime(time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second))
			o.(*posturev1.APIKey).Spec.ExpiresAt = &later
		}},
		{"Provider", &posturev1.Provider{}, func(o client.Object) { o.(*posturev1.Provider).Spec.Alias = "renamed" }},
		{"MCPServer", &posturev1.MCPServer{}, func(o client.Object) { o.(*posturev1.MCPServer).Spec.Replicas = ptr.To[int32](2) }},
		{"MuteRule", &posturev1.MuteRule{}, func(o client.Object) { o.(*posturev1.MuteRule).Spec.Reason = "accepted again" }},
	} {
		t.Run(s.kind+"/stale observedGeneration", func(t *testing.T) {
			var tc *healthCase
			for i := range cases {
				if cases[i].kind == s.kind && cases[i].want == kstatus.CurrentStatus {
					tc = &cases[i]
					break
				}
			}
			if err := k8s.Get(ctx, tc.key, s.obj); err != nil {
				t.Fatal(err)
			}
			s.change(s.obj)
			if err := k8s.Update(ctx, s.obj); err != nil {
				t.Fatal(err)
			}
			checkHealth(t, getUnstructured(t, s.kind, tc.key), kstatus.InProgressStatus, argo[s.kind], flux[s.kind])
		})
	}

	// Nor is an object the controllers have not reconciled yet Current: its
	// status reads as observedGeneration 0 (a CRD default) until written.
	fresh := map[string]client.Object{
		"Tenant":    newTenant(t, nil),
		"APIKey":    newAPIKey(t, ns, "fresh", nil),
		"Provider":  newProvider(t, ns, "aws", "333333333333", posturev1.ProviderConnected),
		"Ingestion": upload(t, st, ingTenant.Name, ingNS, report),
		"MCPServer": server("fresh", nil),
		"MuteRule":  rule(ns, "fresh", nil),
	}
	for kind, obj := range fresh {
		t.Run(kind+"/not yet reconciled", func(t *testing.T) {
			checkHealth(t, getUnstructured(t, kind, client.ObjectKeyFromObject(obj)), kstatus.InProgressStatus, argo[kind], flux[kind])
		})
	}
}

func getUnstructured(t *testing.T, kind string, key types.NamespacedName) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(posturev1.GroupVersion.WithKind(kind))
	if err := k8s.Get(context.Background(), key, u); err != nil {
		t.Fatalf("%s %s: %v", kind, key, err)
	}
	return u
}

// waitHealthState waits until the controller has reached the case's state:
// Ready with its reason, for the current generation.
func waitHealthState(t *testing.T, tc healthCase) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s Ready with reason %s", tc.kind, tc.key, tc.reason), func() (bool, string) {
		u = getUnstructured(t, tc.kind, tc.key)
		var conds []metav1.Condition
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, r := range raw {
			var c metav1.Condition
			if m, ok := r.(map[string]any); ok && fromUnstructured(m, &c) == nil {
				conds = append(conds, c)
			}
		}
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		c := meta.FindStatusCondition(conds, posturev1.ConditionReady)
		return c != nil && c.Reason == tc.reason && c.ObservedGeneration == u.GetGeneration() && og == u.GetGeneration(),
			fmt.Sprintf("%v", u.Object["status"])
	})
	return u
}

func fromUnstructured(m map[string]any, c *metav1.Condition) error {
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, c)
}

// checkHealth reads u's health the three ways and compares each with want.
func checkHealth(t *testing.T, u *unstructured.Unstructured, want kstatus.Status, argoScript string, flux fluxCheck) {
	t.Helper()
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatalf("kstatus: %v", err)
	}
	if res.Status != want {
		t.Errorf("kstatus = %s (%s), want %s; status %v", res.Status, res.Message, want, u.Object["status"])
	}
	health, msg := runArgoHealth(t, argoScript, u.Object)
	if health != argoHealthOf[want] {
		t.Errorf("Argo CD health = %s (%s), want %s", health, msg, argoHealthOf[want])
	}
	if msg == "" {
		t.Error("Argo CD health has no message")
	}
	got, err := flux.evaluate(u.Object)
	if err != nil {
		t.Fatalf("Flux healthCheckExprs: %v", err)
	}
	if got != want {
		t.Errorf("Flux healthCheckExprs = %s, want %s", got, want)
	}
}

// loadArgoChecks reads the shipped Lua scripts by kind, checking that the
// argocd-cm patch carries exactly them.
func loadArgoChecks(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(gitopsDir, "argocd", "argocd-cm-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
		t.Fatalf("argocd-cm-patch.yaml: %v", err)
	}
	scripts := map[string]string{}
	for _, kind := range []string{"Tenant", "Ingestion", "APIKey", "Provider", "MCPServer", "MuteRule"} {
		file := filepath.Join(gitopsDir, "argocd", "health-"+strings.ToLower(kind)+".lua")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		key := "resource.customizations.health.posture.dev_" + kind
		if cm.Data[key] != string(src) {
			t.Errorf("argocd-cm-patch.yaml %s differs from %s", key, file)
		}
		scripts[kind] = string(src)
	}
	if len(cm.Data) != len(scripts) {
		t.Errorf("argocd-cm-patch.yaml has %d keys, want %d", len(cm.Data), len(scripts))
	}
	return scripts
}

// runArgoHealth runs a health script the way Argo CD does: gopher-lua with
// the safe standard libraries, the object as global obj, a table returned.
func runArgoHealth(t *testing.T, script string, obj map[string]any) (status, message string) {
	t.Helper()
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		t.Fatalf("health script: %v", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health script returned %s, want a table", l.Get(-1).Type())
	}
	msg := ""
	if m := ret.RawGetString("message"); m != lua.LNil {
		msg = m.String()
	}
	return ret.RawGetString("status").String(), msg
}

// toLua converts a decoded JSON value as Argo CD's decodeValue does.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		tbl := l.NewTable()
		for k, e := range v {
			tbl.RawSetString(k, toLua(l, e))
		}
		return tbl
	case []any:
		tbl := l.NewTable()
		for i, e := range v {
			tbl.RawSetInt(i+1, toLua(l, e))
		}
		return tbl
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	panic(fmt.Sprintf("no Lua form for %T", v))
}

// fluxCheck is one kind's healthCheckExprs entry.
type fluxCheck struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	InProgress string `json:"inProgress"`
	Failed     string `json:"failed"`
	Current    string `json:"current"`
}

func loadFluxChecks(t *testing.T) map[string]fluxCheck {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(gitopsDir, "flux", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ks struct {
		Spec struct {
			HealthCheckExprs []fluxCheck `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &ks); err != nil {
		t.Fatal(err)
	}
	checks := map[string]fluxCheck{}
	for _, c := range ks.Spec.HealthCheckExprs {
		if c.APIVersion != posturev1.GroupVersion.String() {
			t.Errorf("healthCheckExprs %s: apiVersion %s, want %s", c.Kind, c.APIVersion, posturev1.GroupVersion)
		}
		checks[c.Kind] = c
	}
	if len(checks) != 6 {
		t.Errorf("healthCheckExprs cover %d kinds, want 6", len(checks))
	}
	return checks
}

// evaluate is Flux's CEL status reader: InProgress while observedGeneration
// lags, else the first of inProgress, failed, current that holds, else
// InProgress. The object's top-level fields are the expressions' variables.
func (c fluxCheck) evaluate(obj map[string]any) (kstatus.Status, error) {
	u := unstructured.Unstructured{Object: obj}
	if og, found, _ := unstructured.NestedInt64(obj, "status", "observedGeneration"); found && og != u.GetGeneration() {
		return kstatus.InProgressStatus, nil
	}
	env, err := cel.NewEnv(
		cel.Variable("apiVersion", cel.StringType), cel.Variable("kind", cel.StringType),
		cel.Variable("metadata", cel.DynType), cel.Variable("spec", cel.DynType), cel.Variable("status", cel.DynType))
	if err != nil {
		return "", err
	}
	for _, e := range []struct {
		expr   string
		status kstatus.Status
	}{{c.InProgress, kstatus.InProgressStatus}, {c.Failed, kstatus.FailedStatus}, {c.Current, kstatus.CurrentStatus}} {
		if e.expr == "" {
			continue
		}
		ast, iss := env.Compile(e.expr)
		if iss.Err() != nil {
			return "", fmt.Errorf("%s %q: %w", c.Kind, e.expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			return "", err
		}
		out, _, err := prg.Eval(obj)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", c.Kind, e.expr, err)
		}
		if out.Value() == true {
			return e.status, nil
		}
	}
	return kstatus.InProgressStatus, nil
}
