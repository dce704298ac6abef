package testenv_test

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/testenv"
)

// TestAggregateClusterRoles: with no controller-manager, view and edit get
// the rules aggregated into them only from AggregateClusterRoles, and then
// grant what a cluster's would.
func TestAggregateClusterRoles(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if err := testenv.ApplyFile(ctx, c, "config/rbac/aggregated_api_roles.yaml"); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]string{"auditor": "view", "developer": "edit", "owner": "admin"} {
		if err := c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}); err != nil {
			t.Fatal(err)
		}
	}
	allowed := func(user, verb, resource string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns.Name, Verb: verb, Group: "data.posture.dev", Resource: resource,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	if err := testenv.AggregateClusterRoles(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, verb, resource string
		want                 bool
	}{
		{"auditor", "list", "findings", true},
		{"auditor", "get", "scans", true},
		{"auditor", "list", "ingestionerrors", true},
		{"auditor", "create", "uploads", false},
		{"developer", "list", "findings", true},
		{"developer", "create", "uploads", true},
		{"owner", "list", "findings", true},
		{"owner", "create", "uploads", true},
		{"nobody", "list", "findings", false},
	} {
		t.Run(tc.user+" "+tc.verb+" "+tc.resource, func(t *testing.T) {
			if got := allowed(tc.user, tc.verb, tc.resource); got != tc.want {
				t.Errorf("allowed = %t, want %t", got, tc.want)
			}
		})
	}
	// The roles' own rules are the controller's: view still reads pods.
	var view rbacv1.ClusterRole
	if err := c.Get(ctx, client.ObjectKey{Name: "view"}, &view); err != nil {
		t.Fatal(err)
	}
	reads := false
	for _, r := range view.Rules {
		for _, res := range r.Resources {
			if res == "pods" {
				reads = true
			}
		}
	}
	if !reads {
		t.Errorf("view lost the rules of system:aggregate-to-view: %+v", view.Rules)
	}
	// A second call changes nothing.
	rv := view.ResourceVersion
	if err := testenv.AggregateClusterRoles(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "view"}, &view); err != nil || view.ResourceVersion != rv {
		t.Errorf("a second aggregation rewrote view (%v)", err)
	}
}
