package controllers_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/auth"
)

func newKeyValue(t *testing.T) string {
	t.Helper()
	v, _, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// keySecret is a Secret as Sealed Secrets or External Secrets would write
// it: no owner the operator knows, the key under api-key.
func keySecret(ns, name, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "sealed-secrets"}},
		Data: map[string][]byte{controllers.APIKeySecretKey: []byte(value)}}
}

func stalled(k *posturev1.APIKey) *metav1.Condition {
	return meta.FindStatusCondition(k.Status.Conditions, posturev1.ConditionStalled)
}

func setSecretKey(t *testing.T, ns, name, value string) {
	t.Helper()
	_, sec := secretValue(t, ns, name)
	sec.Data[controllers.APIKeySecretKey] = []byte(value)
	if err := k8s.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
}

func TestAPIKeyAdoptsExistingSecret(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	taken := newKeyValue(t)
	create(t, keySecret(ns, "first", taken))
	first := newAPIKey(t, ns, "first", func(k *posturev1.APIKey) { k.Spec.SecretName = "first" })
	waitAPIKey(t, first, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))

	cases := []struct {
		name   string
		value  string // the api-key the Secret holds
		reason string
		status metav1.ConditionStatus
	}{
		{"a key of the operator's format", newKeyValue(t), controllers.ReasonKeyActive, metav1.ConditionTrue},
		{"not a key", "hunter2", controllers.ReasonKeyMalformed, metav1.ConditionFalse},
		{"a prefix too short", "pk_abc." + strings.Repeat("A", 43), controllers.ReasonKeyMalformed, metav1.ConditionFalse},
		{"the key of another APIKey", taken, controllers.ReasonSecretConflict, metav1.ConditionFalse},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "adopt-" + string(rune('a'+i))
			create(t, keySecret(ns, name, tc.value))
			_, before := secretValue(t, ns, name)
			k := newAPIKey(t, ns, name, func(k *posturev1.APIKey) { k.Spec.SecretName = name })
			got := waitAPIKey(t, k, keyReady(tc.status, tc.reason))

			_, after := secretValue(t, ns, name)
			if after.ResourceVersion != before.ResourceVersion || len(after.OwnerReferences) != 0 {
				t.Errorf("the adopted Secret was written (resourceVersion %s → %s, owners %+v)", before.ResourceVersion, after.ResourceVersion, after.OwnerReferences)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
			if strings.Contains(ready.Message, tc.value) {
				t.Errorf("the condition repeats the key: %q", ready.Message)
			}
			if tc.status == metav1.ConditionTrue {
				prefix, _ := auth.ParseKey(tc.value)
				if got.Status.Hash != auth.HashKey(tc.value) || got.Status.Prefix != prefix || got.Status.KeyOrigin != controllers.KeyOriginAdopted || got.Status.SecretName != name {
					t.Errorf("status = %+v, want the Secret's key, origin Adopted", got.Status)
				}
				if s := stalled(got); s != nil {
					t.Errorf("Stalled = %+v on an adopted key", s)
				}
				return
			}
			if got.Status.Hash != "" {
				t.Errorf("status.hash = %s for a key that was refused", got.Status.Hash)
			}
			if s := stalled(got); s == nil || s.Status != metav1.ConditionTrue || s.Reason != tc.reason {
				t.Errorf("Stalled = %+v, want True/%s", s, tc.reason)
			}
			// Fixing the Secret is enough: it is read again and adopted.
			fixed := newKeyValue(t)
			setSecretKey(t, ns, name, fixed)
			got = waitAPIKey(t, k, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))
			if got.Status.Hash != auth.HashKey(fixed) || stalled(got) != nil {
				t.Errorf("after the fix: hash matches %v, Stalled %+v", got.Status.Hash == auth.HashKey(fixed), stalled(got))
			}
		})
	}

	// Deleting the APIKey leaves an adopted Secret alone: it has no owner.
	if err := k8s.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if v, _ := secretValue(t, ns, "first"); v != taken {
		t.Error("deleting the APIKey changed its adopted Secret")
	}
}

// Under the default name (<APIKey>-api-key) an existing Secret is not
// adopted: its author was never checked for the right to read it, and its
// key may be one that was revoked and left behind. Named in
// spec.secretName, which admission checks, the same Secret is adopted.
func TestAPIKeyAdoptsOnlyANamedSecret(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	left := newKeyValue(t)
	create(t, keySecret(ns, "legacy-api-key", left))
	_, before := secretValue(t, ns, "legacy-api-key")

	k := newAPIKey(t, ns, "legacy", nil)
	got := waitAPIKey(t, k, keyReady(metav1.ConditionFalse, controllers.ReasonSecretConflict))
	if got.Status.Hash != "" {
		t.Errorf("status.hash = %s: the Secret's key was adopted under the default name", got.Status.Hash)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
	if !strings.Contains(ready.Message, "spec.secretName") || strings.Contains(ready.Message, left) {
		t.Errorf("Ready message %q: want it to point to spec.secretName, without the key", ready.Message)
	}
	if _, after := secretValue(t, ns, "legacy-api-key"); after.ResourceVersion != before.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Errorf("the Secret was written (resourceVersion %s → %s, owners %+v)", before.ResourceVersion, after.ResourceVersion, after.OwnerReferences)
	}

	named := newAPIKey(t, ns, "named", func(k *posturev1.APIKey) { k.Spec.SecretName = "legacy-api-key" })
	if got := waitAPIKey(t, named, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive)); got.Status.Hash != auth.HashKey(left) {
		t.Errorf("named in spec.secretName, the Secret's key was not adopted: %+v", got.Status)
	}
}

// A live key whose spec.secretName is changed follows the Secret named: it
// says so while that Secret is missing (the old key still works), and takes
// the key the Secret holds once it appears.
func TestAPIKeyFollowsARenamedSecret(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	first, second := newKeyValue(t), newKeyValue(t)
	create(t, keySecret(ns, "first-key", first))
	k := newAPIKey(t, ns, "mover", func(k *posturev1.APIKey) { k.Spec.SecretName = "first-key" })
	waitAPIKey(t, k, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))

	rename := func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(k), k); err != nil {
			return err
		}
		k.Spec.SecretName = "second-key"
		return k8s.Update(context.Background(), k)
	}
	if err := rename(); err != nil {
		t.Fatal(err)
	}
	got := waitAPIKey(t, k, keyReady(metav1.ConditionFalse, controllers.ReasonSecretMissing))
	ready := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
	if got.Status.Hash != auth.HashKey(first) || got.Status.SecretName != "first-key" || !strings.Contains(ready.Message, "second-key") {
		t.Errorf("renamed to a missing Secret: status %+v, Ready %q; want the first key kept and the missing Secret named", got.Status, ready.Message)
	}

	create(t, keySecret(ns, "second-key", second))
	got = waitAPIKey(t, k, func(k *posturev1.APIKey) bool {
		return k.Status.Hash == auth.HashKey(second) && readyIs(k.Status.Conditions, metav1.ConditionTrue, controllers.ReasonKeyActive)
	})
	if got.Status.SecretName != "second-key" || got.Status.KeyOrigin != controllers.KeyOriginAdopted {
		t.Errorf("after the Secret appeared: status %+v; want the key of second-key, adopted", got.Status)
	}
}

// TestAPIKeyFollowsItsSecret: the Secret is the key's source of truth. A new
// key written there (rotated in the secret manager, or a sealed Secret
// taking the place of a generated one) replaces the old key.
func TestAPIKeyFollowsItsSecret(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace

	cases := []struct {
		name string
		// replace puts value in the key's Secret.
		replace func(t *testing.T, k *posturev1.APIKey, value string)
	}{
		{"adopted Secret rotated", func(t *testing.T, k *posturev1.APIKey, value string) { setSecretKey(t, ns, k.Status.SecretName, value) }},
		{"generated Secret replaced by a sealed one", func(t *testing.T, k *posturev1.APIKey, value string) {
			_, sec := secretValue(t, ns, k.Status.SecretName)
			if err := k8s.Delete(context.Background(), sec); err != nil {
				t.Fatal(err)
			}
			waitAPIKey(t, k, keyReady(metav1.ConditionFalse, controllers.ReasonSecretMissing))
			create(t, keySecret(ns, k.Status.SecretName, value))
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "follow-" + string(rune('a'+i))
			if i == 0 {
				create(t, keySecret(ns, name, newKeyValue(t)))
			}
			k := newAPIKey(t, ns, name, func(k *posturev1.APIKey) { k.Spec.SecretName = name })
			old := waitAPIKey(t, k, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))
			next := newKeyValue(t)
			tc.replace(t, old, next)
			got := waitAPIKey(t, k, func(k *posturev1.APIKey) bool {
				return k.Status.Hash == auth.HashKey(next) && readyIs(k.Status.Conditions, metav1.ConditionTrue, controllers.ReasonKeyActive)
			})
			if got.Status.KeyOrigin != controllers.KeyOriginAdopted {
				t.Errorf("keyOrigin = %q, want Adopted", got.Status.KeyOrigin)
			}
			if reasons := eventReasonsOf(t, k); !strings.Contains(strings.Join(reasons, ","), controllers.ReasonKeyChanged) {
				t.Errorf("events = %v, want a %s event", reasons, controllers.ReasonKeyChanged)
			}
		})
	}
}

func eventReasonsOf(t *testing.T, o client.Object) []string {
	t.Helper()
	ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace()}}
	return eventReasons(t, ing, 2)
}
