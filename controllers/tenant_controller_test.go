package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// runTenancy starts a manager with the tenant, API key and provider
// controllers and, when st is set, the ingestion controller with billing.
func runTenancy(t *testing.T, st store.Store) {
	t.Helper()
	startManager(t, "default", func(mgr ctrl.Manager) error {
		ctx := context.Background()
		if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("posture-tenant"), RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.APIKeyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("posture-apikey"), RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if st == nil {
			return nil
		}
		worker := &ingest.Worker{Store: st, Log: ctrl.Log.WithName("worker"), ProgressInterval: 10 * time.Millisecond}
		exec, done, err := controllers.NewInProcessExecutor(mgr, worker, 4)
		if err != nil {
			return err
		}
		return (&controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st, Executor: exec, Done: done,
			Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
			Billing: &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		}).SetupWithManager(mgr)
	})
}

func allPermissions() []posturev1.Permission {
	return []posturev1.Permission{
		posturev1.PermissionManageIngestions, posturev1.PermissionManageProviders, posturev1.PermissionManageScans,
		posturev1.PermissionManageUsers, posturev1.PermissionManageAccount, posturev1.PermissionManageBilling,
		posturev1.PermissionUnlimitedVisibility,
	}
}

// newTenant creates a Tenant with a generated name; mutate adjusts its spec.
func newTenant(t *testing.T, mutate func(*posturev1.Tenant)) *posturev1.Tenant {
	t.Helper()
	tn := &posturev1.Tenant{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
		Spec: posturev1.TenantSpec{
			Subscription: posturev1.Subscription{Active: true, Plan: "test", ProviderLimit: 5},
			Roles:        []posturev1.Role{{Name: "admin", Permissions: allPermissions()}, {Name: "viewer"}},
			Users:        []posturev1.User{{Email: "admin@example.com", Role: "admin"}},
		},
	}
	if mutate != nil {
		mutate(tn)
	}
	if err := k8s.Create(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), tn) })
	return tn
}

// waitTenant polls a Tenant until cond holds.
func waitTenant(t *testing.T, name, what string, cond func(*posturev1.Tenant) bool) *posturev1.Tenant {
	t.Helper()
	return waitObject(t, types.NamespacedName{Name: name}, 30*time.Second, what, cond)
}

func readyIs(conds []metav1.Condition, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(conds, posturev1.ConditionReady)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
}

func tenantReady(status metav1.ConditionStatus, reason string) func(*posturev1.Tenant) bool {
	return func(tn *posturev1.Tenant) bool {
		return tn.Status.ObservedGeneration == tn.Generation && readyIs(tn.Status.Conditions, status, reason)
	}
}

func TestTenantCreatesAndLabelsNamespace(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	got := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, controllers.ReasonTenantReady))
	want := "tenant-" + tn.Name
	if got.Status.Namespace != want {
		t.Errorf("status.namespace = %q, want %q", got.Status.Namespace, want)
	}
	if got.Status.ProviderLimit != 5 || got.Status.Providers != 0 {
		t.Errorf("usage = %d of %d, want 0 of 5", got.Status.Providers, got.Status.ProviderLimit)
	}
	var ns corev1.Namespace
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: want}, &ns); err != nil {
		t.Fatalf("namespace %s: %v", want, err)
	}
	if ns.Labels[posturev1.LabelTenant] != tn.Name {
		t.Errorf("namespace labels = %v, want %s=%s", ns.Labels, posturev1.LabelTenant, tn.Name)
	}
}

func TestTenantAdoptsExistingNamespace(t *testing.T) {
	runTenancy(t, nil)
	ns := newNamespace(t, "existing")
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Namespace = ns })
	waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	var got corev1.Namespace
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: ns}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[posturev1.LabelTenant] != tn.Name {
		t.Errorf("namespace labels = %v, want the tenant label added", got.Labels)
	}

	// A second tenant naming the same namespace must not take it over.
	other := newTenant(t, func(o *posturev1.Tenant) { o.Spec.Namespace = ns })
	got2 := waitTenant(t, other.Name, "NamespaceConflict", tenantReady(metav1.ConditionFalse, controllers.ReasonNamespaceConflict))
	if c := meta.FindStatusCondition(got2.Status.Conditions, posturev1.ConditionReady); !strings.Contains(c.Message, tn.Name) {
		t.Errorf("conflict message %q should name the owning tenant %s", c.Message, tn.Name)
	}
	if c := meta.FindStatusCondition(got2.Status.Conditions, posturev1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != controllers.ReasonNamespaceConflict {
		t.Errorf("the intruder's Stalled = %+v, want True %s", c, controllers.ReasonNamespaceConflict)
	}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: ns}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[posturev1.LabelTenant] != tn.Name {
		t.Errorf("after the intruder, namespace labels = %v, want %s=%s kept", got.Labels, posturev1.LabelTenant, tn.Name)
	}
	first := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, controllers.ReasonTenantReady))
	if c := meta.FindStatusCondition(first.Status.Conditions, posturev1.ConditionStalled); c != nil {
		t.Errorf("the owner carries Stalled: %+v", c)
	}
}

func TestTenantUserChecks(t *testing.T) {
	runTenancy(t, nil)
	secret := func(name string, data map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}
	}
	for _, tc := range []struct {
		name   string
		users  []posturev1.User
		before *corev1.Secret // exists when the Tenant is created
		fix    func(t *testing.T, tn *posturev1.Tenant, ns string)
		reason string
		detail string
	}{
		{
			name:   "unknown role, then the role is added",
			users:  []posturev1.User{{Email: "a@example.com", Role: "superuser"}},
			reason: controllers.ReasonUnknownRole, detail: `a@example.com names role "superuser"`,
			fix: func(t *testing.T, tn *posturev1.Tenant, _ string) {
				var cur posturev1.Tenant
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tn), &cur); err != nil {
					t.Fatal(err)
				}
				cur.Spec.Roles = append(cur.Spec.Roles, posturev1.Role{Name: "superuser"})
				if err := k8s.Update(context.Background(), &cur); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:   "password Secret missing, then created",
			users:  []posturev1.User{{Email: "b@example.com", Role: "admin", PasswordSecretRef: &posturev1.SecretKeyRef{Name: "b-password"}}},
			reason: controllers.ReasonPasswordSecret, detail: "b-password does not exist",
			fix: func(t *testing.T, _ *posturev1.Tenant, ns string) {
				s := secret("b-password", map[string]string{"password": "pw-123456"})
				s.Namespace = ns
				if err := k8s.Create(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:   "password Secret without the key, then fixed",
			users:  []posturev1.User{{Email: "c@example.com", Role: "admin", PasswordSecretRef: &posturev1.SecretKeyRef{Name: "c-password", Key: "pw"}}},
			before: secret("c-password", map[string]string{"password": "pw-123456"}),
			reason: controllers.ReasonPasswordSecret, detail: "c-password has no key pw",
			fix: func(t *testing.T, _ *posturev1.Tenant, ns string) {
				var s corev1.Secret
				if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "c-password"}, &s); err != nil {
					t.Fatal(err)
				}
				s.Data["pw"] = []byte("pw-123456")
				if err := k8s.Update(context.Background(), &s); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, "users")
			if tc.before != nil {
				tc.before.Namespace = ns
				if err := k8s.Create(context.Background(), tc.before); err != nil {
					t.Fatal(err)
				}
			}
			tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Namespace, tn.Spec.Users = ns, tc.users })
			got := waitTenant(t, tn.Name, tc.reason, tenantReady(metav1.ConditionFalse, tc.reason))
			if c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady); !strings.Contains(c.Message, tc.detail) {
				t.Errorf("message %q should contain %q", c.Message, tc.detail)
			}
			tc.fix(t, tn, ns)
			waitTenant(t, tn.Name, "Ready once fixed", tenantReady(metav1.ConditionTrue, ""))
		})
	}
}

// TestTenantNoticesPasswordSecretDeleted: password Secrets are not watched,
// so a Ready Tenant looks at them again now and then. One deleted after the
// Tenant became Ready (a Secret pruned from Git, a rotation gone wrong)
// makes it PasswordSecretMissing and Stalled, not Ready for ever while its
// user cannot sign in.
func TestTenantNoticesPasswordSecretDeleted(t *testing.T) {
	runTenancy(t, nil)
	ns := newNamespace(t, "users")
	pw := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "d-password", Namespace: ns}, StringData: map[string]string{"password": "pw-123456"}}
	if err := k8s.Create(context.Background(), pw); err != nil {
		t.Fatal(err)
	}
	tn := newTenant(t, func(tn *posturev1.Tenant) {
		tn.Spec.Namespace = ns
		tn.Spec.Users = []posturev1.User{{Email: "d@example.com", Role: "admin", PasswordSecretRef: &posturev1.SecretKeyRef{Name: "d-password"}}}
	})
	waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	if err := k8s.Delete(context.Background(), pw); err != nil {
		t.Fatal(err)
	}
	got := waitTenant(t, tn.Name, "PasswordSecretMissing after the Secret was deleted", tenantReady(metav1.ConditionFalse, controllers.ReasonPasswordSecret))
	if !meta.IsStatusConditionTrue(got.Status.Conditions, posturev1.ConditionStalled) {
		t.Errorf("conditions %+v, want Stalled=True", got.Status.Conditions)
	}
}

// TestTenantIngestionHistoryMaxAgeValidation: the API server refuses a
// maxAge the manager cannot read. One it accepted but Go's time.ParseDuration
// refuses ("30d") made the manager's Tenant informer fail to decode the list
// of every Tenant: no Tenant was reconciled any more, and a restarted
// manager never synced its cache nor served the API.
func TestTenantIngestionHistoryMaxAgeValidation(t *testing.T) {
	for _, tc := range []struct {
		maxAge string
		ok     bool
	}{{"720h", true}, {"0s", true}, {"0", true}, {"1h30m", true}, {"1.5h", true}, {"30d", false}, {"1w", false}, {"soon", false}, {"", false}} {
		t.Run(tc.maxAge, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "posture.dev/v1alpha1", "kind": "Tenant",
				"metadata": map[string]any{"generateName": "maxage-"},
				"spec":     map[string]any{"ingestionHistory": map[string]any{"maxAge": tc.maxAge}},
			}}
			err := k8s.Create(context.Background(), u, client.DryRunAll)
			switch {
			case tc.ok && err != nil:
				t.Errorf("maxAge %q refused: %v", tc.maxAge, err)
			case !tc.ok && err == nil:
				t.Errorf("maxAge %q accepted; the manager cannot decode it", tc.maxAge)
			}
		})
	}
}

func newProvider(t *testing.T, ns, typ, uid string, origin posturev1.ProviderOrigin) *posturev1.Provider {
	t.Helper()
	p := &posturev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: billing.ProviderName(typ, uid), Namespace: ns},
		Spec:       posturev1.ProviderSpec{Type: typ, UID: uid, Origin: origin},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTenantCountsProviders(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 3 })
	waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	ns := "tenant-" + tn.Name
	a := newProvider(t, ns, "aws", "111111111111", posturev1.ProviderConnected)
	newProvider(t, ns, "azure", "00000000-0000-0000-0000-000000000001", posturev1.ProviderConnected)
	// A provider elsewhere is not this tenant's.
	newProvider(t, newNamespace(t, "elsewhere"), "aws", "999999999999", posturev1.ProviderConnected)
	got := waitTenant(t, tn.Name, "2 providers", func(t *posturev1.Tenant) bool { return t.Status.Providers == 2 })
	if c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady); c == nil || !strings.Contains(c.Message, "2 of 3 providers") {
		t.Errorf("Ready message = %+v, want it to show 2 of 3 providers", c)
	}
	if err := k8s.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitTenant(t, tn.Name, "1 provider after a deletion", func(t *posturev1.Tenant) bool { return t.Status.Providers == 1 })

	// Providers of a namespace that no Tenant uses are reported as unbilled.
	orphan := newProvider(t, newNamespace(t, "orphan"), "gcp", "project-1", posturev1.ProviderConnected)
	waitProvider(t, orphan, func(p *posturev1.Provider) bool {
		return readyIs(p.Status.Conditions, metav1.ConditionFalse, controllers.ReasonNoTenant)
	})
	billed := newProvider(t, ns, "gcp", "project-2", posturev1.ProviderConnected)
	waitProvider(t, billed, func(p *posturev1.Provider) bool {
		return readyIs(p.Status.Conditions, metav1.ConditionTrue, controllers.ReasonProviderBilled) && p.Status.ObservedGeneration == p.Generation
	})
}

func waitProvider(t *testing.T, p *posturev1.Provider, cond func(*posturev1.Provider) bool) *posturev1.Provider {
	t.Helper()
	return waitObject(t, client.ObjectKeyFromObject(p), 30*time.Second, "its condition", cond)
}

// TestPrinterColumns checks what `kubectl get tenants,providers,apikeys` shows,
// through the server-side Table the API server builds from the CRDs.
func TestPrinterColumns(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	ns := "tenant-" + tn.Name
	newProvider(t, ns, "aws", "123456789012", posturev1.ProviderImported)
	key := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns}, Spec: posturev1.APIKeySpec{User: "admin@example.com"}}
	if err := k8s.Create(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	waitAPIKey(t, key, func(k *posturev1.APIKey) bool { return readyIs(k.Status.Conditions, metav1.ConditionTrue, "") })

	for _, tc := range []struct {
		path    string
		columns []string
		cells   map[string]string // column -> expected cell text
	}{
		{"/apis/posture.dev/v1alpha1/tenants/" + tn.Name,
			[]string{"Name", "Namespace", "Subscribed", "Plan", "Providers", "Limit", "Ready", "Age", "Message"},
			map[string]string{"Name": tn.Name, "Namespace": ns, "Subscribed": "true", "Plan": "test", "Providers": "1", "Limit": "5", "Ready": "True"}},
		{"/apis/posture.dev/v1alpha1/namespaces/" + ns + "/providers",
			[]string{"Name", "Type", "UID", "Alias", "Origin", "Ready", "Age", "Message"},
			map[string]string{"Name": "aws-123456789012", "Type": "aws", "UID": "123456789012", "Origin": "imported", "Ready": "True"}},
		{"/apis/posture.dev/v1alpha1/namespaces/" + ns + "/apikeys",
			[]string{"Name", "User", "Prefix", "Secret", "Revoked", "Expires", "Ready", "Usable", "Age", "Message"},
			map[string]string{"Name": "ci", "User": "admin@example.com", "Secret": "ci-api-key", "Revoked": "false", "Ready": "True", "Usable": "True"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			testenv.Eventually(t, 10*time.Second, "the table's cells", func() (bool, string) {
				table := getTable(t, tc.path)
				var names []string
				for _, c := range table.ColumnDefinitions {
					names = append(names, c.Name)
				}
				if strings.Join(names, ",") != strings.Join(tc.columns, ",") {
					t.Fatalf("columns = %v, want %v", names, tc.columns)
				}
				mismatch := ""
				if len(table.Rows) != 1 {
					mismatch = fmt.Sprintf("%d rows", len(table.Rows))
				} else {
					for i, name := range names {
						want, ok := tc.cells[name]
						if got := fmt.Sprint(table.Rows[0].Cells[i]); ok && got != want {
							mismatch += fmt.Sprintf(" %s=%q (want %q)", name, got, want)
						}
						if name == "Expires" && !strings.HasPrefix(fmt.Sprint(table.Rows[0].Cells[i]), fmt.Sprint(time.Now().Year()+1)) {
							mismatch += fmt.Sprintf(" Expires=%v (want a date next year)", table.Rows[0].Cells[i])
						}
						if name == "Prefix" && !strings.HasPrefix(fmt.Sprint(table.Rows[0].Cells[i]), "pk_") {
							mismatch += fmt.Sprintf(" Prefix=%v", table.Rows[0].Cells[i])
						}
					}
				}
				return mismatch == "", "cells:" + mismatch
			})
		})
	}
}

func getTable(t *testing.T, path string) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(restConfig.Host, "/")+path, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	return &table
}

// A Tenant whose namespace could not be created is refused at admission,
// where its author sees why, instead of failing in the controller with no
// condition to show for it.
func TestTenantNamespaceIsValidatedAtAdmission(t *testing.T) {
	long := strings.Repeat("n", 57)
	for _, tc := range []struct {
		name, namespace, refused string
	}{
		{"dotted.name", "", "set spec.namespace"},
		{long, "", "set spec.namespace"},
		{"bad-ns", "Not_A_Namespace", "spec.namespace"},
		{"long-ns", strings.Repeat("x", 64), "spec.namespace"},
		{"dotted.with-ns", "dotted-with-ns", ""},
		{strings.Repeat("m", 56), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: posturev1.TenantSpec{Namespace: tc.namespace}}
			err := k8s.Create(context.Background(), tn)
			if err == nil {
				t.Cleanup(func() { _ = k8s.Delete(context.Background(), tn) })
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("create = %v; want it refused, naming %q", err, tc.refused)
			}
		})
	}
}
