package webhook_test

import (
	"context"
	"fmt"
	"strings"
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
)

// condition reads one condition of an object fresh from the API server.
func (te *tenancyEnv) condition(obj client.Object, conds func() []metav1.Condition, typ string) (*metav1.Condition, error) {
	if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(conds(), typ), nil
}

// TestNamespaceBelongsToFirstTenant applies a second Tenant with demo's
// namespace and the same users (pointing at demo's password Secrets). The
// namespace stays demo's: its label is unchanged, demo's key, token and
// sign-in keep working, demo stays Ready, and only the intruder reports
// NamespaceConflict (Ready=False, Stalled=True). The intruder cannot sign
// demo's users in either.
func TestNamespaceBelongsToFirstTenant(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	demo := te.tenants["demo"]
	ns := demo.NamespaceName()
	admin := te.as(t, te.key("demo-admin"))
	eventually(t, 10*time.Second, "demo's key works", func() string {
		if r := admin.get("/api/v1/ingestions", ""); r.status != 200 {
			return r.String()
		}
		return ""
	})
	token := te.signIn(t, "demo-admin").Data.Attributes.Access
	eventually(t, 10*time.Second, "demo's namespace carries its label", func() string {
		var got corev1.Namespace
		if err := te.k8s.Get(context.Background(), types.NamespacedName{Name: ns}, &got); err != nil {
			return err.Error()
		}
		if got.Labels[posturev1.LabelTenant] != demo.Name {
			return fmt.Sprintf("labels %v", got.Labels)
		}
		return ""
	})

	var cur posturev1.Tenant
	if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(demo), &cur); err != nil {
		t.Fatal(err)
	}
	squatter := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "squatter-" + randomSuffix()}, Spec: *cur.Spec.DeepCopy()}
	squatter.Spec.Namespace = ns
	if err := te.k8s.Create(context.Background(), squatter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = te.k8s.Delete(context.Background(), squatter) })

	conflict := func(typ string, want metav1.ConditionStatus) string {
		c, err := te.condition(squatter, func() []metav1.Condition { return squatter.Status.Conditions }, typ)
		if err != nil {
			return err.Error()
		}
		if c == nil || c.Status != want || c.Reason != controllers.ReasonNamespaceConflict || !strings.Contains(c.Message, demo.Name) {
			return fmt.Sprintf("%s = %+v, want %s %s naming %s", typ, c, want, controllers.ReasonNamespaceConflict, demo.Name)
		}
		return ""
	}
	eventually(t, 15*time.Second, "the squatter reports NamespaceConflict", func() string {
		return conflict(posturev1.ConditionReady, metav1.ConditionFalse)
	})
	if msg := conflict(posturev1.ConditionStalled, metav1.ConditionTrue); msg != "" {
		t.Error(msg)
	}

	// A lock-out shows up as soon as the cache has both Tenants, which it
	// has once the squatter reports the conflict (read from that cache); a
	// relabelling as soon as the squatter reconciles again, which it has
	// once it observed a later generation of its spec.
	bearer := te.as(t, "Bearer "+token)
	stillDemos := func(when string) {
		t.Helper()
		if r := admin.get("/api/v1/ingestions", ""); r.status != 200 {
			t.Fatalf("demo's API key %s: %s", when, r)
		}
		if r := bearer.get("/api/v1/ingestions", ""); r.status != 200 {
			t.Fatalf("demo's access token %s: %s", when, r)
		}
	}
	stillDemos("once the squatter appeared")
	for attempt := 0; ; attempt++ {
		if err := te.k8s.Get(context.Background(), client.ObjectKeyFromObject(squatter), squatter); err != nil {
			t.Fatal(err)
		}
		squatter.Spec.Subscription.Plan += "-again"
		err := te.k8s.Update(context.Background(), squatter)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 10 {
			t.Fatal(err)
		}
	}
	generation := squatter.Generation
	eventually(t, 15*time.Second, "the squatter reconciled again", func() string {
		if msg := conflict(posturev1.ConditionReady, metav1.ConditionFalse); msg != "" {
			return msg
		}
		if squatter.Status.ObservedGeneration < generation {
			return fmt.Sprintf("observed generation %d of %d", squatter.Status.ObservedGeneration, generation)
		}
		return ""
	})
	stillDemos("once the squatter reconciled again")
	var got corev1.Namespace
	if err := te.k8s.Get(context.Background(), types.NamespacedName{Name: ns}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[posturev1.LabelTenant] != demo.Name {
		t.Errorf("namespace %s label %s = %q, want the first tenant %s", ns, posturev1.LabelTenant, got.Labels[posturev1.LabelTenant], demo.Name)
	}
	if c, err := te.condition(&cur, func() []metav1.Condition { return cur.Status.Conditions }, posturev1.ConditionReady); err != nil || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("demo Ready = %+v (%v), want True", c, err)
	}
	if c, err := te.condition(&cur, func() []metav1.Condition { return cur.Status.Conditions }, posturev1.ConditionStalled); err != nil || c != nil {
		t.Errorf("demo Stalled = %+v (%v), want no such condition", c, err)
	}
	key := te.keyObjs["demo-admin"].DeepCopy()
	if c, err := te.condition(key, func() []metav1.Condition { return key.Status.Conditions }, posturev1.ConditionReady); err != nil || c == nil || c.Reason != controllers.ReasonKeyActive {
		t.Errorf("demo's APIKey Ready = %+v (%v), want %s", c, err, controllers.ReasonKeyActive)
	}

	// The squatter names demo's users and their password Secrets: signing in
	// through it fails, and without a tenant the sign-in lands in demo.
	email := te.emails["demo-admin"]
	for _, tc := range []struct {
		name   string
		tenant string
		status int
	}{
		{"through the squatter", squatter.Name, 401},
		{"without a tenant", "", 200},
		{"through demo", demo.Name, 200},
	} {
		t.Run("sign-in "+tc.name, func(t *testing.T) {
			attrs := map[string]string{"email": email, "password": te.pw[email]}
			if tc.tenant != "" {
				attrs["tenant"] = tc.tenant
			}
			r := te.post(t, "/api/v1/tokens", tokensBody("tokens", attrs), "application/vnd.api+json")
			if r.status != tc.status {
				t.Fatalf("sign-in: %s, want %d", r, tc.status)
			}
			if tc.status != 200 {
				return
			}
			tok := wantTokens(t, r).Data.Attributes.Access
			if r := te.as(t, "Bearer "+tok).get("/api/v1/ingestions", ""); r.status != 200 {
				t.Errorf("the token of a sign-in %s: %s", tc.name, r)
			}
		})
	}
}
