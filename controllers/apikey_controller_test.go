package controllers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/auth"
)

func waitAPIKey(t *testing.T, k *posturev1.APIKey, cond func(*posturev1.APIKey) bool) *posturev1.APIKey {
	t.Helper()
	return waitObject(t, client.ObjectKeyFromObject(k), 30*time.Second, "its condition", cond)
}

func keyReady(status metav1.ConditionStatus, reason string) func(*posturev1.APIKey) bool {
	return func(k *posturev1.APIKey) bool {
		return k.Status.ObservedGeneration == k.Generation && readyIs(k.Status.Conditions, status, reason)
	}
}

// keyEnded holds once a key ended on purpose reads as declared: Ready, yet
// not Usable, both for the reason it ended.
func keyEnded(reason string) func(*posturev1.APIKey) bool {
	return func(k *posturev1.APIKey) bool {
		u := meta.FindStatusCondition(k.Status.Conditions, posturev1.ConditionUsable)
		return keyReady(metav1.ConditionTrue, reason)(k) && u != nil && u.Status == metav1.ConditionFalse &&
			u.Reason == reason && u.ObservedGeneration == k.Generation
	}
}

func newAPIKey(t *testing.T, ns, name string, mutate func(*posturev1.APIKey)) *posturev1.APIKey {
	t.Helper()
	k := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: posturev1.APIKeySpec{User: "admin@example.com"}}
	if mutate != nil {
		mutate(k)
	}
	if err := k8s.Create(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return k
}

func secretValue(t *testing.T, ns, name string) (string, *corev1.Secret) {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("Secret %s/%s: %v", ns, name, err)
	}
	return string(s.Data[controllers.APIKeySecretKey]), &s
}

func TestAPIKeyGeneratedOnce(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	k := newAPIKey(t, ns, "ci", nil)
	got := waitAPIKey(t, k, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))

	key, sec := secretValue(t, ns, "ci-api-key")
	prefix, err := auth.ParseKey(key)
	if err != nil {
		t.Fatalf("the Secret does not hold a key: %v", err)
	}
	if got.Status.Prefix != prefix || got.Status.Hash != auth.HashKey(key) || got.Status.SecretName != "ci-api-key" {
		t.Errorf("status = prefix %s hash %s secret %s; want the key's prefix %s and sha256", got.Status.Prefix, got.Status.Hash, got.Status.SecretName, prefix)
	}
	if !metav1.IsControlledBy(sec, got) {
		t.Errorf("the Secret is not owned by its APIKey: %+v", sec.OwnerReferences)
	}
	for k, v := range map[string]string{posturev1.LabelTenant: tn.Name, posturev1.LabelManagedBy: posturev1.ManagedByValue, controllers.LabelAPIKey: "ci"} {
		if sec.Labels[k] != v {
			t.Errorf("Secret label %s = %q, want %q", k, sec.Labels[k], v)
		}
	}
	wantExp := got.CreationTimestamp.Add(365 * 24 * time.Hour)
	if got.Status.ExpiresAt == nil || got.Status.ExpiresAt.Sub(wantExp).Abs() > time.Second {
		t.Errorf("status.expiresAt = %v, want creation + 365 days (%v)", got.Status.ExpiresAt, wantExp)
	}

	// Later reconciles (a spec change, the Secret deleted) never make a new key.
	var cur posturev1.APIKey
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(k), &cur); err != nil {
		t.Fatal(err)
	}
	later := metav1.NewTime(time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second))
	cur.Spec.ExpiresAt = &later
	if err := k8s.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	got = waitAPIKey(t, k, func(k *posturev1.APIKey) bool {
		return k.Status.ObservedGeneration == k.Generation && k.Status.ExpiresAt != nil && k.Status.ExpiresAt.Equal(&later)
	})
	if again, _ := secretValue(t, ns, "ci-api-key"); again != key || got.Status.Hash != auth.HashKey(key) {
		t.Fatal("the key changed after a spec change")
	}
	if err := k8s.Delete(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	got = waitAPIKey(t, k, keyReady(metav1.ConditionFalse, controllers.ReasonSecretMissing))
	if got.Status.Hash != auth.HashKey(key) {
		t.Fatal("a deleted Secret made the controller replace the key")
	}
	// A reconcile of a later generation, which comes after the one that
	// found the Secret gone, writes none either.
	touchAPIKey(t, k)
	var none corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "ci-api-key"}, &none); err == nil {
		t.Fatal("the controller wrote a new Secret for a key it already issued")
	}
}

// touchAPIKey changes k's spec (its expiry, later) and waits until the
// controller has reconciled that generation: a reconcile that comes after
// everything done to k before, whose outcome a check that something did
// not happen can rely on, where a sleep would only hope for it.
func touchAPIKey(t *testing.T, k *posturev1.APIKey) *posturev1.APIKey {
	t.Helper()
	var cur posturev1.APIKey
	for attempt := 0; ; attempt++ {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(k), &cur); err != nil {
			t.Fatal(err)
		}
		later := metav1.NewTime(time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second))
		cur.Spec.ExpiresAt = &later
		err := k8s.Update(context.Background(), &cur)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 10 {
			t.Fatal(err)
		}
	}
	return waitAPIKey(t, k, func(got *posturev1.APIKey) bool { return got.Status.ObservedGeneration >= cur.Generation })
}

func TestAPIKeyConditions(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	past := metav1.NewTime(time.Now().Add(-time.Hour))
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, StringData: map[string]string{"x": "y"}}
	if err := k8s.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	noTenant := newNamespace(t, "no-tenant")
	for _, tc := range []struct {
		name, key string
		ns        string
		mutate    func(*posturev1.APIKey)
		status    metav1.ConditionStatus
		reason    string
		// usable is whether the key authenticates; a key ended on purpose
		// is Ready (reconciled as declared) but not Usable.
		usable metav1.ConditionStatus
		secret string // Secret expected to hold the key; "" none
	}{
		{"active with a custom Secret name", "custom", ns, func(k *posturev1.APIKey) { k.Spec.SecretName = "my-key" }, metav1.ConditionTrue, controllers.ReasonKeyActive, metav1.ConditionTrue, "my-key"},
		{"revoked", "revoked", ns, func(k *posturev1.APIKey) { k.Spec.Revoked = true }, metav1.ConditionTrue, controllers.ReasonKeyRevoked, metav1.ConditionFalse, "revoked-api-key"},
		{"expired", "expired", ns, func(k *posturev1.APIKey) { k.Spec.ExpiresAt = &past }, metav1.ConditionTrue, controllers.ReasonKeyExpired, metav1.ConditionFalse, "expired-api-key"},
		{"unknown user", "unknown", ns, func(k *posturev1.APIKey) { k.Spec.User = "nobody@example.com" }, metav1.ConditionFalse, controllers.ReasonUserUnknown, metav1.ConditionFalse, "unknown-api-key"},
		{"namespace without a Tenant", "orphan", noTenant, nil, metav1.ConditionFalse, controllers.ReasonUserUnknown, metav1.ConditionFalse, "orphan-api-key"},
		{"Secret name taken by another Secret", "conflict", ns, func(k *posturev1.APIKey) { k.Spec.SecretName = "taken" }, metav1.ConditionFalse, controllers.ReasonSecretConflict, metav1.ConditionFalse, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newAPIKey(t, tc.ns, tc.key, tc.mutate)
			got := waitAPIKey(t, k, keyReady(tc.status, tc.reason))
			if u := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionUsable); u == nil || u.Status != tc.usable || u.ObservedGeneration != got.Generation {
				t.Errorf("Usable = %+v, want %s at generation %d", u, tc.usable, got.Generation)
			}
			if tc.secret == "" {
				if got.Status.Hash != "" || got.Status.Prefix != "" {
					t.Errorf("status has a prefix/hash although no key was delivered")
				}
				if v, _ := secretValue(t, tc.ns, "taken"); v != "" {
					t.Errorf("the foreign Secret was overwritten")
				}
				return
			}
			if got.Status.SecretName != tc.secret {
				t.Errorf("status.secretName = %q, want %q", got.Status.SecretName, tc.secret)
			}
			if key, _ := secretValue(t, tc.ns, tc.secret); auth.HashKey(key) != got.Status.Hash {
				t.Errorf("status.hash does not match the key in Secret %s", tc.secret)
			}
		})
	}
}

func TestAPIKeyFollowsExpiryAndUsers(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, func(tn *posturev1.Tenant) {
		tn.Spec.Users = append(tn.Spec.Users, posturev1.User{Email: "leaver@example.com", Role: "viewer"})
	})
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace

	soon := metav1.NewTime(time.Now().Add(3 * time.Second).Truncate(time.Second))
	expiring := newAPIKey(t, ns, "expiring", func(k *posturev1.APIKey) { k.Spec.ExpiresAt = &soon })
	waitAPIKey(t, expiring, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))
	got := waitAPIKey(t, expiring, keyEnded(controllers.ReasonKeyExpired))
	if c := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionUsable); c.LastTransitionTime.Before(&soon) {
		t.Errorf("flipped to Expired at %v, before the expiry %v", c.LastTransitionTime, soon)
	}

	leaver := newAPIKey(t, ns, "leaver", func(k *posturev1.APIKey) { k.Spec.User = "leaver@example.com" })
	waitAPIKey(t, leaver, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))
	var cur posturev1.Tenant
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tn), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Users = cur.Spec.Users[:1]
	if err := k8s.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	waitAPIKey(t, leaver, keyReady(metav1.ConditionFalse, controllers.ReasonUserUnknown))
}

// TestAPIKeyNeverReissuedAfterItsEnd loses an ended key's Secret and even
// its hash: the controller must not hand out a new key for the same APIKey,
// and the condition keeps saying why the key is dead.
func TestAPIKeyNeverReissuedAfterItsEnd(t *testing.T) {
	runTenancy(t, nil)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	past := metav1.NewTime(time.Now().Add(-time.Hour).UTC().Truncate(time.Second))
	for _, tc := range []struct {
		name   string
		end    func(*posturev1.APIKey)
		reason string
		ended  func(*posturev1.APIKeyStatus) bool
	}{
		{"revoked", func(k *posturev1.APIKey) { k.Spec.Revoked = true }, controllers.ReasonKeyRevoked,
			func(s *posturev1.APIKeyStatus) bool { return s.RevokedAt != nil }},
		{"expired", func(k *posturev1.APIKey) { k.Spec.ExpiresAt = &past }, controllers.ReasonKeyExpired,
			func(s *posturev1.APIKeyStatus) bool {
				return s.ExpiredAt != nil && s.ExpiredAt.Equal(&past) && s.ExpiresAt.Equal(&past)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newAPIKey(t, ns, "reissue-"+tc.name, nil)
			waitAPIKey(t, k, keyReady(metav1.ConditionTrue, controllers.ReasonKeyActive))
			var cur posturev1.APIKey
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(k), &cur); err != nil {
				t.Fatal(err)
			}
			tc.end(&cur)
			if err := k8s.Update(context.Background(), &cur); err != nil {
				t.Fatal(err)
			}
			got := waitAPIKey(t, k, func(k *posturev1.APIKey) bool {
				return keyEnded(tc.reason)(k) && tc.ended(&k.Status)
			})
			_, sec := secretValue(t, ns, got.Status.SecretName)
			if err := k8s.Delete(context.Background(), sec); err != nil {
				t.Fatal(err)
			}
			// The hash lost too, as after a partial status edit.
			for attempt := 0; ; attempt++ {
				got.Status.Hash, got.Status.Prefix = "", ""
				err := k8s.Status().Update(context.Background(), got)
				if err == nil {
					break
				}
				if !apierrors.IsConflict(err) || attempt == 10 {
					t.Fatal(err)
				}
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(k), got); err != nil {
					t.Fatal(err)
				}
			}
			// A reconcile of a later generation reads the lost hash.
			touchAPIKey(t, k)
			got = waitAPIKey(t, k, keyEnded(tc.reason))
			if got.Status.Hash != "" {
				t.Error("the controller recorded a new key for an APIKey that had ended")
			}
			var none corev1.Secret
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: got.Status.SecretName}, &none); err == nil {
				t.Error("the controller wrote a new Secret for an APIKey that had ended")
			}
		})
	}
}
