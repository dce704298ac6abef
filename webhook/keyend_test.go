package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
)

// TestRevocationAndExpiryAreFinal undoes a revocation or an expiry in every
// way the API server lets through, and checks that the key answers 401 for
// good and that the controller issues no new key for it.
func TestRevocationAndExpiryAreFinal(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	ns := te.tenants["demo"].NamespaceName()
	user := te.emails["demo-admin"]
	for _, tc := range []struct {
		name string
		// mutate shapes the APIKey at creation.
		mutate func(k *posturev1.APIKey)
		// end makes the working key stop working.
		end func(t *testing.T, k *posturev1.APIKey)
		// endReason is the reason of the APIKey's Usable=False once ended
		// (Ready stays True: the key is as declared).
		endReason string
		// undo tries to make it work again; it must not.
		undo   func(t *testing.T, k *posturev1.APIKey)
		detail string
	}{
		{
			name:      "revoked, then un-revoked",
			end:       func(t *testing.T, k *posturev1.APIKey) { te.update(k, func() { k.Spec.Revoked = true }) },
			endReason: controllers.ReasonKeyRevoked,
			undo: func(t *testing.T, k *posturev1.APIKey) {
				if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(k), k); err != nil {
					t.Fatal(err)
				}
				k.Spec.Revoked = false
				err := te.k8s.Update(context.Background(), k)
				if err == nil || !strings.Contains(err.Error(), "create a new APIKey") {
					t.Errorf("setting spec.revoked back to false: err = %v, want the API server to refuse it", err)
				}
			},
			detail: "revoked",
		},
		{
			// The CRD rule bypassed: a revocation the controller recorded
			// earlier keeps the key dead though spec.revoked is false.
			name: "revocation recorded in status, spec.revoked false",
			end: func(t *testing.T, k *posturev1.APIKey) {
				for range 10 {
					if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(k), k); err != nil {
						t.Fatal(err)
					}
					at := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
					k.Status.RevokedAt = &at
					if err := te.k8s.Status().Update(context.Background(), k); err == nil {
						return
					}
				}
				t.Fatal("could not write status.revokedAt")
			},
			endReason: controllers.ReasonKeyRevoked,
			undo:      func(*testing.T, *posturev1.APIKey) {},
			detail:    "revoked",
		},
		{
			name: "expired, then expiresAt moved a year later",
			mutate: func(k *posturev1.APIKey) {
				soon := metav1.NewTime(time.Now().Add(4 * time.Second))
				k.Spec.ExpiresAt = &soon
			},
			end: func(t *testing.T, k *posturev1.APIKey) {
				if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(k), k); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Until(k.Spec.ExpiresAt.Time))
			},
			endReason: controllers.ReasonKeyExpired,
			undo: func(t *testing.T, k *posturev1.APIKey) {
				te.update(k, func() { later := metav1.NewTime(time.Now().Add(365 * 24 * time.Hour)); k.Spec.ExpiresAt = &later })
			},
			detail: "expired",
		},
		{
			name: "expiresAt moved into the past, then back",
			end: func(t *testing.T, k *posturev1.APIKey) {
				te.update(k, func() { past := metav1.NewTime(time.Now().Add(-time.Minute)); k.Spec.ExpiresAt = &past })
			},
			endReason: controllers.ReasonKeyExpired,
			undo:      func(t *testing.T, k *posturev1.APIKey) { te.update(k, func() { k.Spec.ExpiresAt = nil }) },
			detail:    "expired",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "end-" + strings.ToLower(strings.NewReplacer(" ", "-", ",", "", ".", "").Replace(tc.name))
			key, obj := te.newKey(ns, name, user, tc.mutate)
			a := te.as(t, "Api-Key "+key)
			eventually(t, 10*time.Second, "the new key works", func() string {
				if r := a.get("/api/v1/ingestions", ""); r.status != 200 {
					return r.String()
				}
				return ""
			})
			issued := obj.Status.Hash
			tc.end(t, obj)
			eventually(t, 10*time.Second, "the key fails", func() string {
				if r := a.get("/api/v1/ingestions", ""); r.status != 401 {
					return r.String()
				}
				return ""
			})
			// Until the controller has seen the end, spec alone holds the key
			// back; afterwards status must.
			eventually(t, 10*time.Second, "the controller sees the end", func() string {
				if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
					return err.Error()
				}
				c := meta.FindStatusCondition(obj.Status.Conditions, posturev1.ConditionUsable)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.endReason || c.ObservedGeneration != obj.Generation {
					return fmt.Sprintf("status %+v", obj.Status)
				}
				return ""
			})
			if obj.Status.RevokedAt == nil && obj.Status.ExpiredAt == nil {
				t.Errorf("the status does not record the end: %+v", obj.Status)
			}

			tc.undo(t, obj)
			// The key must stay refused before the controller reconciles the
			// undo, and once it has: its observed generation says when.
			if r := a.get("/api/v1/ingestions", ""); r.status != 401 {
				t.Fatalf("the key works again after the undo: %s", r)
			}
			eventually(t, 10*time.Second, "the controller observes the undo", func() string {
				if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
					return err.Error()
				}
				if obj.Status.ObservedGeneration != obj.Generation {
					return fmt.Sprintf("observed generation %d of %d", obj.Status.ObservedGeneration, obj.Generation)
				}
				return ""
			})
			wantError(t, a.get("/api/v1/ingestions", ""), 401, "not_authenticated", "header:Authorization", tc.detail, "create a new APIKey")
			if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(obj.Status.Conditions, posturev1.ConditionUsable)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.endReason || c.ObservedGeneration != obj.Generation {
				t.Errorf("after the undo Usable = %+v (generation %d), want False %s", c, obj.Generation, tc.endReason)
			}
			if obj.Status.Hash != issued {
				t.Error("the controller issued a new key for an APIKey that had ended")
			}
		})
	}
}
