package tenancy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/tenancy"
	"github.com/posture-dev/posture/internal/testenv"
)

func tenant(name, ns string, active bool, limit int32, admitted int) *posturev1.Tenant {
	t := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: posturev1.TenantSpec{Namespace: ns, Subscription: posturev1.Subscription{Active: active, ProviderLimit: limit}}}
	for range admitted {
		t.Status.AdmittedProviders = append(t.Status.AdmittedProviders, posturev1.AdmittedProvider{})
	}
	return t
}

func namespace(name, owner string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if owner != "" {
		ns.Labels = map[string]string{posturev1.LabelTenant: owner}
	}
	return ns
}

// TestResolve: the one answer every door and controller gets for a
// namespace, and how a door tells the refusals apart.
func TestResolve(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).
		WithIndex(&posturev1.Tenant{}, tenancy.IndexNamespace, func(o client.Object) []string {
			return []string{o.(*posturev1.Tenant).NamespaceName()}
		}).
		WithObjects(
			tenant("acme", "tenant-acme", true, 0, 0), namespace("tenant-acme", "acme"),
			tenant("free", "tenant-free", false, 0, 0), namespace("tenant-free", "free"),
			// A squatter naming acme's namespace changes nothing: the label decides.
			tenant("squatter", "tenant-acme", true, 0, 0),
			// Two claim an unlabelled namespace: nobody owns it.
			tenant("a", "shared", true, 0, 0), tenant("b", "shared", true, 0, 0), namespace("shared", ""),
			namespace("plain", ""),
		).Build()
	for _, tc := range []struct {
		ns      string
		tenant  string
		refusal tenancy.Refusal
		says    string
	}{
		{"tenant-acme", "acme", tenancy.NotRefused, ""},
		{"tenant-free", "", tenancy.NotSubscribed, "tenant free has no active subscription"},
		{"shared", "", tenancy.OwnerUnclear, "claimed by several Tenants (a, b)"},
		{"plain", "", tenancy.NoOwner, "no Tenant uses namespace plain"},
	} {
		got, err := tenancy.Resolve(context.Background(), c, tc.ns)
		refusal, why := tenancy.Refused(err)
		if refusal != tc.refusal || !strings.Contains(why, tc.says) || (tc.tenant != "" && (got == nil || got.Name != tc.tenant)) {
			t.Errorf("Resolve(%s) = %v, %v (refusal %d %q); want tenant %q, refusal %d saying %q", tc.ns, got, err, refusal, why, tc.tenant, tc.refusal, tc.says)
		}
	}
	if refusal, _ := tenancy.Refused(errors.New("the cache is down")); refusal != tenancy.NotRefused {
		t.Errorf("a failed lookup is refusal %d, want NotRefused", refusal)
	}
}

// TestGate: one message for a tenant without a subscription, wherever it
// is answered.
func TestGate(t *testing.T) {
	if err := tenancy.Gate("acme", true); err != nil {
		t.Errorf("a subscribed tenant: %v", err)
	}
	err := tenancy.Gate("acme", false)
	var sub *tenancy.SubscriptionRequired
	if !errors.As(err, &sub) || err.Error() != "tenant acme has no active subscription; ingesting reports and reading their findings need one" {
		t.Errorf("an unsubscribed tenant: %v", err)
	}
}

func TestUsageOf(t *testing.T) {
	for _, tc := range []struct {
		limit     int32
		admitted  int
		unlimited bool
		remaining int
	}{
		{0, 3, true, 0},
		{5, 2, false, 3},
		{2, 3, false, 0},
	} {
		u := tenancy.UsageOf(tenant("t", "", true, tc.limit, tc.admitted))
		if u.Billed != tc.admitted || u.Limit != tc.limit || u.Unlimited() != tc.unlimited || u.Remaining != tc.remaining {
			t.Errorf("limit %d, %d admitted: usage %+v (unlimited %v)", tc.limit, tc.admitted, u, u.Unlimited())
		}
	}
}
