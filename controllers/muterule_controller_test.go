package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// seedFindings writes n findings of one scan for tenant, the first
// third of them of an S3 check, as a succeeded ingestion.
func seedFindings(t *testing.T, st store.Store, tenant, ing, scan string, n int) {
	t.Helper()
	ctx := context.Background()
	var fs []store.Finding
	for i := range n {
		check := "ec2_open_port"
		if i < n/3 {
			check = "s3_bucket_public"
		}
		fs = append(fs, store.Finding{UID: fmt.Sprintf("u-%d", i), ScanID: scan, CheckID: check, Title: "t", Severity: "high",
			SeverityID: 4, StatusCode: "FAIL", Region: "eu-west-1", ProviderType: "aws", ProviderUID: "123456789012",
			ResourceUID: fmt.Sprintf("arn:aws:s3:::b-%d", i), Time: time.Now(), Raw: []byte(`{}`)})
	}
	if err := st.StartRun(ctx, tenant, ing, 1, n); err != nil {
		t.Fatal(err)
	}
	b := store.Batch{Findings: fs, Scans: []store.Scan{{ID: scan, ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"}}}
	if err := st.WriteBatch(ctx, tenant, ing, 1, b); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: store.RunSucceeded}); err != nil {
		t.Fatal(err)
	}
}

func mutedCount(t *testing.T, st store.Store, tenant string) int {
	t.Helper()
	_, n, err := st.ListFindings(context.Background(), tenant, store.FindingQuery{Muted: store.MutedOnly})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// kstatusOf computes the rule's kstatus, as Flux and kubectl wait read it.
func kstatusOf(t *testing.T, key types.NamespacedName) kstatus.Status {
	t.Helper()
	res, err := kstatus.Compute(getUnstructured(t, "MuteRule", key))
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// TestMuteRuleLifecycle drives MuteRules through the controller on a real
// API server: a valid rule marks the stored findings by a pass in batches
// and reads Ready (kstatus Current) with its count; an invalid one is
// Stalled (Failed) with a message naming the field; an expired one reads
// Expired and its marks are gone; deleting a rule removes its marks
// before the object goes (its finalizer).
func TestMuteRuleLifecycle(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	ns := tenantNamespace(t, "mute")
	seedFindings(t, st, ns, "ing-1", "scan-1", 30)
	startManager(t, newNamespace(t, "posture-system"), func(mgr ctrl.Manager) error {
		// Batches of 4: the pass over 30 findings takes several steps.
		return (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st, Batch: 4}).SetupWithManager(ctx, mgr)
	})
	newRule := func(name string, spec posturev1.MuteRuleSpec) types.NamespacedName {
		t.Helper()
		r := &posturev1.MuteRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
		if err := k8s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return client.ObjectKeyFromObject(r)
	}

	// A valid rule: the pass marks the ten S3 findings.
	s3 := newRule("s3-public", posturev1.MuteRuleSpec{Match: posturev1.MuteMatch{CheckID: "s3_*"}, Reason: "public website buckets"})
	r := waitObject(t, s3, 30*time.Second, "Ready after its pass", func(r *posturev1.MuteRule) bool {
		return readyIs(r.Status.Conditions, metav1.ConditionTrue, controllers.ReasonMuteApplied) && r.Status.AppliedGeneration == r.Generation
	})
	if r.Status.MatchedFindings != 10 || r.Status.ScannedFindings != 30 || r.Status.ObservedGeneration != r.Generation {
		t.Errorf("status after the pass: %+v, want 10 matched of 30 scanned", r.Status)
	}
	if !strings.Contains(meta.FindStatusCondition(r.Status.Conditions, posturev1.ConditionReady).Message, "mutes 10 findings") {
		t.Errorf("Ready message %q does not say how many findings it mutes", meta.FindStatusCondition(r.Status.Conditions, posturev1.ConditionReady).Message)
	}
	if got := kstatusOf(t, s3); got != kstatus.CurrentStatus {
		t.Errorf("kstatus of an applied rule = %s, want Current", got)
	}
	if n := mutedCount(t, st, ns); n != 10 {
		t.Errorf("muted findings in the store = %d, want 10", n)
	}
	// New ingestions are marked as they are written.
	seedFindings(t, st, ns, "ing-2", "scan-2", 30)
	if n := mutedCount(t, st, ns); n != 20 {
		t.Errorf("muted findings after a new ingestion = %d, want 20 (both scans)", n)
	}

	// Invalid rules are Stalled, their message naming the field.
	for _, tc := range []struct {
		name  string
		match posturev1.MuteMatch
		field string
	}{
		{"bad-glob", posturev1.MuteMatch{ResourceUID: "arn:aws:s3:::[logs"}, "spec.match.resourceUid"},
		{"bad-severity", posturev1.MuteMatch{Severity: []string{"severe"}}, "spec.match.severity[0]"},
		{"no-matcher", posturev1.MuteMatch{}, "spec.match: matches nothing"},
	} {
		key := newRule(tc.name, posturev1.MuteRuleSpec{Match: tc.match, Reason: "x"})
		r := waitObject(t, key, 30*time.Second, "Stalled", func(r *posturev1.MuteRule) bool {
			return meta.IsStatusConditionTrue(r.Status.Conditions, posturev1.ConditionStalled)
		})
		if c := meta.FindStatusCondition(r.Status.Conditions, posturev1.ConditionStalled); c.Reason != controllers.ReasonMuteInvalid || !strings.Contains(c.Message, tc.field) {
			t.Errorf("%s: Stalled %s %q, want reason %s naming %s", tc.name, c.Reason, c.Message, controllers.ReasonMuteInvalid, tc.field)
		}
		if got := kstatusOf(t, key); got != kstatus.FailedStatus {
			t.Errorf("%s: kstatus = %s, want Failed", tc.name, got)
		}
	}
	if n := mutedCount(t, st, ns); n != 20 {
		t.Errorf("invalid rules changed the marks: %d muted, want 20", n)
	}

	// Expiry: the rule stops muting, and says so.
	if err := k8s.Get(ctx, s3, r); err != nil {
		t.Fatal(err)
	}
	r.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(2 * time.Second)}
	if err := k8s.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	r = waitObject(t, s3, 30*time.Second, "Expired", func(r *posturev1.MuteRule) bool {
		return meta.IsStatusConditionTrue(r.Status.Conditions, posturev1.ConditionExpired)
	})
	if !readyIs(r.Status.Conditions, metav1.ConditionTrue, controllers.ReasonMuteExpired) || r.Status.MatchedFindings != 0 {
		t.Errorf("an expired rule: %+v, want Ready (Expired) and 0 matched", r.Status)
	}
	if got := kstatusOf(t, s3); got != kstatus.CurrentStatus {
		t.Errorf("kstatus of an expired rule = %s, want Current", got)
	}
	if n := mutedCount(t, st, ns); n != 0 {
		t.Errorf("muted findings after expiry = %d, want 0", n)
	}

	// Deleting a rule removes its marks before the object goes.
	all := newRule("all-high", posturev1.MuteRuleSpec{Match: posturev1.MuteMatch{Severity: []string{"high"}}, Reason: "triaged"})
	waitObject(t, all, 30*time.Second, "Ready", func(r *posturev1.MuteRule) bool {
		return readyIs(r.Status.Conditions, metav1.ConditionTrue, controllers.ReasonMuteApplied) && r.Status.MatchedFindings == 60
	})
	if err := k8s.Delete(ctx, &posturev1.MuteRule{ObjectMeta: metav1.ObjectMeta{Name: all.Name, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the rule deleted", func() (bool, string) {
		err := k8s.Get(ctx, all, &posturev1.MuteRule{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	if n := mutedCount(t, st, ns); n != 0 {
		t.Errorf("muted findings after the rule's deletion = %d, want 0", n)
	}
}

// TestMuteRuleWithoutTenant: a rule in a namespace no Tenant uses is
// Stalled and says so.
func TestMuteRuleWithoutTenant(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "no-tenant")
	startManager(t, newNamespace(t, "posture-system"), func(mgr ctrl.Manager) error {
		return (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: newStore(t)}).SetupWithManager(ctx, mgr)
	})
	r := &posturev1.MuteRule{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns},
		Spec: posturev1.MuteRuleSpec{Match: posturev1.MuteMatch{CheckID: "x"}, Reason: "y"}}
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got := waitObject(t, client.ObjectKeyFromObject(r), 30*time.Second, "Stalled", func(r *posturev1.MuteRule) bool {
		return meta.IsStatusConditionTrue(r.Status.Conditions, posturev1.ConditionStalled)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady); c.Reason != controllers.ReasonNoTenant || !strings.Contains(c.Message, ns) {
		t.Errorf("Ready %s %q, want %s naming namespace %s", c.Reason, c.Message, controllers.ReasonNoTenant, ns)
	}
}
