package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
)

// TestAdoptedKeyAuthenticates: a key brought in a Secret (as Sealed Secrets
// or External Secrets deliver it after a cluster is rebuilt from Git) works
// against the REST API, and once the Secret holds another key, the old one
// is refused and the new one works.
func TestAdoptedKeyAuthenticates(t *testing.T) {
	te := startTenancy(t, tenancyOpts{keyRecheck: 100 * time.Millisecond})
	ns := te.tenants["demo"].NamespaceName()
	first, _, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "scanner-key", Namespace: ns},
		Data: map[string][]byte{"api-key": []byte(first)}}
	if err := te.k8s.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	got, obj := te.newKey(ns, "scanner", te.emails["demo-admin"], func(k *posturev1.APIKey) { k.Spec.SecretName = "scanner-key" })
	if got != first || obj.Status.KeyOrigin != "Adopted" {
		t.Fatalf("the APIKey did not adopt the Secret's key (origin %q)", obj.Status.KeyOrigin)
	}
	status := func(key string) int {
		return te.as(t, "Api-Key "+key).get("/api/v1/findings", "").status
	}
	if s := status(first); s != http.StatusOK {
		t.Fatalf("GET /api/v1/findings with the adopted key: %d, want 200", s)
	}

	second, _, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	te.update(sec, func() { sec.Data["api-key"] = []byte(second) })
	eventually(t, 30*time.Second, "the rotated key replaces the old one", func() string {
		if o, n := status(first), status(second); o != http.StatusUnauthorized || n != http.StatusOK {
			return fmt.Sprintf("old key %d (want 401), new key %d (want 200)", o, n)
		}
		return ""
	})
	var after corev1.Secret
	if err := te.k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "scanner-key"}, &after); err != nil {
		t.Fatal(err)
	}
	if string(after.Data["api-key"]) != second || len(after.OwnerReferences) != 0 {
		t.Errorf("the operator wrote the adopted Secret: owners %+v", after.OwnerReferences)
	}
}

// TestKeyHeldTwiceIsRefused: two APIKeys holding one key (two adoptions of
// one Secret racing) must not let either decide, since one may be revoked
// or act for another user.
func TestKeyHeldTwiceIsRefused(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	ns := te.tenants["demo"].NamespaceName()
	key, first := te.newKey(ns, "first", te.emails["demo-admin"], nil)
	if s := te.as(t, "Api-Key "+key).get("/api/v1/findings", "").status; s != http.StatusOK {
		t.Fatalf("the key alone: %d, want 200", s)
	}
	// The second names the first's Secret, as a racing adoption does, so
	// the controller never gives it a key of its own that would replace
	// the one written below (the adoption itself it refuses: the test
	// writes the status the race would have left).
	second := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: ns}, Spec: posturev1.APIKeySpec{User: te.emails["demo-admin"], SecretName: first.Status.SecretName}}
	if err := te.k8s.Create(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	// The controller writes the status too: retry on its conflicts.
	for i := 0; ; i++ {
		if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(second), second); err != nil {
			t.Fatal(err)
		}
		second.Status.Prefix, second.Status.Hash, second.Status.SecretName = first.Status.Prefix, first.Status.Hash, "first-api-key"
		err := te.k8s.Status().Update(context.Background(), second)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || i == 20 {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "a key held twice is refused", func() string {
		r := te.as(t, "Api-Key "+key).get("/api/v1/findings", "")
		if r.status != http.StatusUnauthorized {
			return fmt.Sprintf("%d %s", r.status, r.body)
		}
		return ""
	})
}
