package controllers

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/store"
)

// summary is what the derivations decide, in the terms kstatus reads.
type summary struct {
	ready       metav1.ConditionStatus
	reason      string
	reconciling bool
	stalled     bool
	message     string // a fragment the Ready message must hold
}

// checkSummary compares conditions with want, and checks that every
// condition carries the generation it describes.
func checkSummary(t *testing.T, conds []metav1.Condition, generation int64, want summary) {
	t.Helper()
	ready := meta.FindStatusCondition(conds, posturev1.ConditionReady)
	if ready == nil || ready.Status != want.ready || ready.Reason != want.reason || !strings.Contains(ready.Message, want.message) {
		t.Errorf("Ready = %+v, want %s/%s containing %q", ready, want.ready, want.reason, want.message)
	}
	for typ, on := range map[string]bool{posturev1.ConditionReconciling: want.reconciling, posturev1.ConditionStalled: want.stalled} {
		c := meta.FindStatusCondition(conds, typ)
		switch {
		case on && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != want.reason):
			t.Errorf("%s = %+v, want True with reason %s", typ, c, want.reason)
		case !on && c != nil:
			t.Errorf("%s = %+v, want it absent", typ, c)
		}
	}
	for _, c := range conds {
		if c.ObservedGeneration != generation {
			t.Errorf("condition %s has observedGeneration %d, want %d", c.Type, c.ObservedGeneration, generation)
		}
	}
}

func TestSetIngestionPhase(t *testing.T) {
	for _, tc := range []struct {
		phase  posturev1.IngestionPhase
		reason string
		want   summary
	}{
		{posturev1.IngestionPending, ReasonPending, summary{ready: metav1.ConditionUnknown, reason: ReasonPending, reconciling: true}},
		{posturev1.IngestionProcessing, ReasonProcessing, summary{ready: metav1.ConditionUnknown, reason: ReasonProcessing, reconciling: true}},
		{posturev1.IngestionProcessing, ReasonRetrying, summary{ready: metav1.ConditionUnknown, reason: ReasonRetrying, reconciling: true}},
		{posturev1.IngestionCompleted, ReasonCompleted, summary{ready: metav1.ConditionTrue, reason: ReasonCompleted}},
		{posturev1.IngestionFailed, ReasonFailed, summary{ready: metav1.ConditionFalse, reason: ReasonFailed, stalled: true}},
	} {
		t.Run(string(tc.phase)+"/"+tc.reason, func(t *testing.T) {
			// From a processing ingestion at an older generation, so that
			// leftovers of the previous phase would show.
			ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			setIngestionPhase(ing, posturev1.IngestionProcessing, ReasonProcessing, "before")
			ing.Generation = 4
			setIngestionPhase(ing, tc.phase, tc.reason, "the message")
			if ing.Status.Phase != tc.phase || ing.Status.Message != "the message" || ing.Status.ObservedGeneration != 4 {
				t.Errorf("status = %+v, want phase %s, its message, observedGeneration 4", ing.Status, tc.phase)
			}
			tc.want.message = "the message"
			checkSummary(t, ing.Status.Conditions, 4, tc.want)
		})
	}
}

func TestDeriveTenantStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    tenantFacts
		want summary
	}{
		{"ready", tenantFacts{Providers: 2}, summary{ready: metav1.ConditionTrue, reason: ReasonTenantReady, message: "2 of 5 providers"}},
		{"namespace of another tenant", tenantFacts{NamespaceOwner: "other"}, summary{ready: metav1.ConditionFalse, reason: ReasonNamespaceConflict, stalled: true, message: "belongs to tenant other"}},
		{"namespace being deleted", tenantFacts{NamespaceTerminating: true}, summary{ready: metav1.ConditionUnknown, reason: ReasonNamespaceTerminate, reconciling: true, message: "created again"}},
		{"unknown role", tenantFacts{UnknownRoles: []string{`a@example.com names role "x"`}}, summary{ready: metav1.ConditionFalse, reason: ReasonUnknownRole, stalled: true, message: `role "x"`}},
		{"password Secret missing", tenantFacts{MissingSecrets: []string{"a@example.com: Secret ns/pw does not exist"}}, summary{ready: metav1.ConditionFalse, reason: ReasonPasswordSecret, stalled: true, message: "ns/pw does not exist"}},
		{"unknown role reported before a missing Secret", tenantFacts{UnknownRoles: []string{"r"}, MissingSecrets: []string{"s"}}, summary{ready: metav1.ConditionFalse, reason: ReasonUnknownRole, stalled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: 2},
				Spec: posturev1.TenantSpec{Subscription: posturev1.Subscription{Active: true, ProviderLimit: 5}}}
			// A previous verdict of each kind must not linger.
			deriveTenantStatus(tn, tenantFacts{Namespace: "tenant-acme", NamespaceOwner: "x"})
			deriveTenantStatus(tn, tenantFacts{Namespace: "tenant-acme", NamespaceTerminating: true})
			tc.f.Namespace = "tenant-acme"
			deriveTenantStatus(tn, tc.f)
			if tn.Status.ObservedGeneration != 2 || tn.Status.Namespace != "tenant-acme" || tn.Status.ProviderLimit != 5 {
				t.Errorf("status = %+v", tn.Status)
			}
			checkSummary(t, tn.Status.Conditions, 2, tc.want)
		})
	}
}

func TestDeriveAPIKeyStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := metav1.NewTime(now.Add(-time.Hour))
	later := metav1.NewTime(now.Add(time.Hour))
	known := apiKeyFacts{Now: now, Tenant: "acme", UserKnown: true}
	for _, tc := range []struct {
		name    string
		status  posturev1.APIKeyStatus
		f       apiKeyFacts
		want    summary
		usable  metav1.ConditionStatus
		requeue time.Duration
	}{
		{"active", posturev1.APIKeyStatus{Hash: "h", ExpiresAt: &later}, known,
			summary{ready: metav1.ConditionTrue, reason: ReasonKeyActive}, metav1.ConditionTrue, time.Hour + time.Second},
		{"revoked is as declared", posturev1.APIKeyStatus{Hash: "h", RevokedAt: &at}, known,
			summary{ready: metav1.ConditionTrue, reason: ReasonKeyRevoked, message: "revoked"}, metav1.ConditionFalse, 0},
		{"expired is as declared", posturev1.APIKeyStatus{Hash: "h", ExpiredAt: &at}, known,
			summary{ready: metav1.ConditionTrue, reason: ReasonKeyExpired, message: "expired"}, metav1.ConditionFalse, 0},
		{"revoked, its user gone", posturev1.APIKeyStatus{Hash: "h", RevokedAt: &at}, apiKeyFacts{Now: now, Tenant: "acme"},
			summary{ready: metav1.ConditionTrue, reason: ReasonKeyRevoked}, metav1.ConditionFalse, 0},
		{"unknown user", posturev1.APIKeyStatus{Hash: "h"}, apiKeyFacts{Now: now, Tenant: "acme"},
			summary{ready: metav1.ConditionFalse, reason: ReasonUserUnknown, stalled: true, message: "not a user of tenant acme"}, metav1.ConditionFalse, 0},
		{"no tenant", posturev1.APIKeyStatus{Hash: "h"}, apiKeyFacts{Now: now},
			summary{ready: metav1.ConditionFalse, reason: ReasonUserUnknown, stalled: true, message: "no Tenant uses namespace"}, metav1.ConditionFalse, 0},
		{"tenant ambiguous", posturev1.APIKeyStatus{Hash: "h"}, apiKeyFacts{Now: now, TenantProblem: "claimed by several Tenants"},
			summary{ready: metav1.ConditionFalse, reason: ReasonUserUnknown, stalled: true, message: "several"}, metav1.ConditionFalse, 0},
		{"tenant lookup failed for now", posturev1.APIKeyStatus{Hash: "h"}, apiKeyFacts{Now: now, LookupError: "timeout"},
			summary{ready: metav1.ConditionUnknown, reason: ReasonUserUnknown, reconciling: true}, metav1.ConditionUnknown, 0},
		{"Secret name taken", posturev1.APIKeyStatus{}, apiKeyFacts{Now: now, Tenant: "acme", UserKnown: true, DeliveryReason: ReasonSecretConflict, DeliveryMessage: "taken"},
			summary{ready: metav1.ConditionFalse, reason: ReasonSecretConflict, stalled: true, message: "taken"}, metav1.ConditionFalse, 0},
		{"Secret gone, key still works", posturev1.APIKeyStatus{Hash: "h"}, apiKeyFacts{Now: now, Tenant: "acme", UserKnown: true, DeliveryReason: ReasonSecretMissing, DeliveryMessage: "gone"},
			summary{ready: metav1.ConditionFalse, reason: ReasonSecretMissing, stalled: true, message: "gone"}, metav1.ConditionTrue, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Generation: 7}, Spec: posturev1.APIKeySpec{User: "a@example.com"}, Status: tc.status}
			requeue := deriveAPIKeyStatus(key, tc.f)
			checkSummary(t, key.Status.Conditions, 7, tc.want)
			if u := meta.FindStatusCondition(key.Status.Conditions, posturev1.ConditionUsable); u == nil || u.Status != tc.usable {
				t.Errorf("Usable = %+v, want %s", u, tc.usable)
			}
			if requeue != tc.requeue || key.Status.ObservedGeneration != 7 {
				t.Errorf("requeue %v, observedGeneration %d; want %v, 7", requeue, key.Status.ObservedGeneration, tc.requeue)
			}
		})
	}
}

func TestDeriveProviderStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    providerFacts
		want summary
	}{
		{"billed, unlimited", providerFacts{Tenant: "acme"}, summary{ready: metav1.ConditionTrue, reason: ReasonProviderBilled, message: "billed to tenant acme"}},
		{"billed, last within the limit", providerFacts{Tenant: "acme", Limit: 2, Admitted: true, Billed: 2}, summary{ready: metav1.ConditionTrue, reason: ReasonProviderBilled}},
		{"over the limit", providerFacts{Tenant: "acme", Limit: 2, Billed: 2}, summary{ready: metav1.ConditionFalse, reason: ReasonProviderOverLimit, stalled: true, message: "bills for 2 providers and bills 2 already"}},
		{"no tenant", providerFacts{}, summary{ready: metav1.ConditionFalse, reason: ReasonNoTenant, stalled: true, message: "not billed to anyone"}},
		{"tenant of the namespace gone", providerFacts{TenantProblem: "belongs to tenant x, which does not exist"}, summary{ready: metav1.ConditionFalse, reason: ReasonNoTenant, stalled: true, message: "does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-acme", Generation: 1}, Spec: posturev1.ProviderSpec{Type: "aws", UID: "1"}}
			deriveProviderStatus(p, tc.f)
			checkSummary(t, p.Status.Conditions, 1, tc.want)
		})
	}
}

func TestDeriveMCPServerStatus(t *testing.T) {
	dep := func(replicas int32, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tools", Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, UpdatedReplicas: replicas, AvailableReplicas: available, ReadyReplicas: available, Conditions: conds}}
	}
	for _, tc := range []struct {
		name     string
		f        mcpFacts
		want     summary
		replicas int32
	}{
		{"no image", mcpFacts{NoImage: true}, summary{ready: metav1.ConditionFalse, reason: ReasonMCPNoImage, stalled: true}, 0},
		{"apiBaseURL not allowed", mcpFacts{RefusedURL: "https://evil.example"}, summary{ready: metav1.ConditionFalse, reason: ReasonMCPAPIBaseURLNotAllowed, stalled: true, message: "evil.example"}, 0},
		{"not a tenant namespace", mcpFacts{NoAccess: true}, summary{ready: metav1.ConditionFalse, reason: ReasonMCPNoAccess, stalled: true}, 0},
		{"tenant namespace, access on its way", mcpFacts{NoAccess: true, TenantExists: true}, summary{ready: metav1.ConditionUnknown, reason: ReasonMCPNoAccess, reconciling: true}, 0},
		{"rolling out", mcpFacts{Deployment: dep(2, 1)}, summary{ready: metav1.ConditionFalse, reason: ReasonMCPProgressing, reconciling: true}, 1},
		{"available", mcpFacts{Deployment: dep(2, 2)}, summary{ready: metav1.ConditionTrue, reason: ReasonMCPAvailable}, 2},
		{"past its progress deadline", mcpFacts{Deployment: dep(2, 1, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"})},
			summary{ready: metav1.ConditionFalse, reason: ReasonMCPStalled, stalled: true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "tenant-acme", Generation: 5}}
			deriveMCPServerStatus(m, tc.f)
			checkSummary(t, m.Status.Conditions, 5, tc.want)
			if m.Status.ObservedGeneration != 5 || m.Status.ReadyReplicas != tc.replicas || m.Status.URL == "" {
				t.Errorf("status = %+v, want observedGeneration 5, %d ready replicas and a URL", m.Status, tc.replicas)
			}
		})
	}
}

// TestAllowedAccountsFromStatusFields checks that billing's decision is read
// back from status fields alone: a condition's reason describes, it does not
// decide what a retried attempt may bill.
func TestAllowedAccountsFromStatusFields(t *testing.T) {
	limited := metav1.Condition{Type: ConditionProvidersResolved, Status: metav1.ConditionFalse, Reason: ReasonProviderLimit}
	for _, tc := range []struct {
		name   string
		status posturev1.IngestionStatus
		want   map[string]bool
	}{
		{"no billing ran", posturev1.IngestionStatus{}, nil},
		{"every account fit", posturev1.IngestionStatus{Providers: []string{"aws/1"}}, nil},
		{"some refused", posturev1.IngestionStatus{Providers: []string{"aws/1"}, DeniedProviders: []string{"aws/2"}}, map[string]bool{"aws/1": true}},
		{"all refused", posturev1.IngestionStatus{Providers: []string{}, DeniedProviders: []string{"aws/2"}}, map[string]bool{}},
		{"a limit reason without refused accounts", posturev1.IngestionStatus{Providers: []string{"aws/1"}, Conditions: []metav1.Condition{limited}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AllowedAccountsOf(&posturev1.Ingestion{Status: tc.status})
			if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) {
				t.Fatalf("AllowedAccountsOf = %v, want %v", got, tc.want)
			}
			for k := range tc.want {
				if !got[k] {
					t.Errorf("AllowedAccountsOf = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// Status messages count things as a sentence does: "1 provider", never
// "1 providers".
func TestStatusMessagesPluralise(t *testing.T) {
	tenantMessage := func(users int, limit int32, providers int) string {
		tn := &posturev1.Tenant{Spec: posturev1.TenantSpec{Users: make([]posturev1.User, users),
			Subscription: posturev1.Subscription{Active: true, ProviderLimit: limit}}}
		deriveTenantStatus(tn, tenantFacts{Namespace: "tenant-acme", Providers: providers})
		return meta.FindStatusCondition(tn.Status.Conditions, posturev1.ConditionReady).Message
	}
	providerMessage := func(limit int32) string {
		p := &posturev1.Provider{Spec: posturev1.ProviderSpec{Type: "aws", UID: "1"}}
		deriveProviderStatus(p, providerFacts{Tenant: "acme", Limit: limit, Billed: int(limit)})
		return meta.FindStatusCondition(p.Status.Conditions, posturev1.ConditionReady).Message
	}
	ingestionMessage := func(processed int) string {
		ing := &posturev1.Ingestion{}
		deriveIngestionStatus(ing, ingestionFacts{Ended: &store.Run{Status: store.RunSucceeded, Progress: store.Progress{Processed: processed}}})
		return ing.Status.Message
	}
	for _, tc := range []struct{ name, got, want string }{
		{"counted one", counted(1, "provider"), "1 provider"},
		{"counted none", counted(0, "provider"), "0 providers"},
		{"counted several", counted(int32(5), "provider"), "5 providers"},
		{"usage of a limit of one", providerUsage("acme", 1, 1), "tenant acme now has 1 of 1 provider"},
		{"usage of one of five", providerUsage("acme", 1, 5), "tenant acme now has 1 of 5 providers"},
		{"usage of one, unlimited", providerUsage("acme", 1, 0), "tenant acme now has 1 provider"},
		{"usage of two, unlimited", providerUsage("acme", 2, 0), "tenant acme now has 2 providers"},
		{"tenant of one user and one provider, unlimited", tenantMessage(1, 0, 1), "Namespace tenant-acme, 1 user, subscription active, 1 provider, unlimited"},
		{"tenant of two users, one of five providers", tenantMessage(2, 5, 1), "Namespace tenant-acme, 2 users, subscription active, 1 of 5 providers"},
		{"provider over a limit of one", providerMessage(1), "plan bills for 1 provider and bills 1 already"},
		{"one record processed", ingestionMessage(1), "Processed 1 record, 0 invalid"},
		{"records processed", ingestionMessage(3), "Processed 3 records, 0 invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.got, tc.want) {
				t.Errorf("%q, want it to read %q", tc.got, tc.want)
			}
		})
	}
}
