package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/testenv"
)

const (
	tenantAdmin = "admin@demo.example"
	ciUser      = "ci@demo.example"
	// author is the Kubernetes user under test; every case has its own namespace.
	author = "mallory"
)

var installOnce sync.Once

func adminClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// userClient acts as a plain authenticated user, through impersonation by
// the control plane's admin, so the API server authorizes it with RBAC.
func userClient(t *testing.T, user string) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cl, err := client.New(c, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// installPolicies installs config/admission once and waits until the API
// server enforces both policies, seen by a request each must deny.
func installPolicies(t *testing.T) {
	t.Helper()
	admin := adminClient(t)
	ctx := context.Background()
	var err error
	installOnce.Do(func() { err = testenv.InstallAdmissionPolicies(ctx, admin) })
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, "probe")
	grant(t, ns, author, nil, rbacv1.PolicyRule{APIGroups: []string{"posture.dev"}, Resources: []string{"apikeys", "mcpservers", "ingestions"}, Verbs: []string{"create"}})
	u := userClient(t, author)
	probes := []client.Object{
		&posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}, Spec: posturev1.APIKeySpec{User: tenantAdmin}},
		&posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}, Spec: posturev1.MCPServerSpec{
			APIKeySecretRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "probe"}, Key: "k"}}},
		&posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}, Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{SecretRef: &posturev1.ReportKeyRef{Name: "probe", Key: "k"}}}},
	}
	for _, p := range probes {
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("the admission policies of config/admission to refuse a %T", p), func() (bool, string) {
			err := u.Create(ctx, p.DeepCopyObject().(client.Object), client.DryRunAll)
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), fmt.Sprintf("answered %v", err)
		})
	}
}

func namespace(t *testing.T, prefix string) string {
	t.Helper()
	return testenv.NewNamespace(t, adminClient(t), prefix)
}

// grant gives user the rules in ns (a Role) and the cluster roles (each by
// a RoleBinding in ns), then waits until the authorizer says so, so that a
// denial later is the policy's and not RBAC's cache lagging behind.
func grant(t *testing.T, ns, user string, clusterRoles []string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	admin := adminClient(t)
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if len(rules) > 0 {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "under-test", Namespace: ns}, Rules: rules}
		if err := admin.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
		clusterRoles = append(clusterRoles, "")
	}
	for _, cr := range clusterRoles {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr}
		if cr == "" {
			ref = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "under-test"}
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "under-test-", Namespace: ns}, RoleRef: ref, Subjects: subject}
		if err := admin.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	var checks []authorizationv1.ResourceAttributes
	for _, r := range rules {
		name := ""
		if len(r.ResourceNames) > 0 {
			name = r.ResourceNames[0]
		}
		checks = append(checks, authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0], Name: name})
	}
	for _, cr := range clusterRoles {
		switch cr {
		case "system:aggregate-to-edit":
			checks = append(checks, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"})
		case "posture-apikey-issuer":
			checks = append(checks, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "impersonate", Group: "posture.dev", Resource: "tenantusers", Name: "anyone@demo.example"})
		}
	}
	for _, attrs := range checks {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("RBAC to allow %s %+v", user, attrs), func() (bool, string) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &attrs,
			}}
			if err := admin.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			return sar.Status.Allowed, sar.Status.Reason
		})
	}
}

// checkAdmission fails the test unless err is nil when allowed, or the
// policy's denial naming every wanted phrase otherwise.
func checkAdmission(t *testing.T, err error, allowed bool, want ...string) {
	t.Helper()
	if allowed {
		if err != nil {
			t.Fatalf("refused, want admitted: %v", err)
		}
		return
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		t.Fatalf("got %v; want a denial by the admission policy", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial %q does not say %q", err.Error(), w)
		}
	}
}

func secretRef(name string) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "password"}
}

// An MCPServer hands the Secret it names to its pods: naming one must need
// the right to read it, so creating an MCPServer grants nothing its author
// did not already have.
func TestAdmissionMCPServerSecretNeedsGet(t *testing.T) {
	installPolicies(t)
	mcpRights := rbacv1.PolicyRule{APIGroups: []string{"posture.dev"}, Resources: []string{"mcpservers"}, Verbs: []string{"create", "get", "update", "patch"}}
	getSecret := func(name string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{name}}
	}
	cases := []struct {
		name  string
		rules []rbacv1.PolicyRule
		// existing, when set, is created by the admin before the author acts.
		existing *corev1.SecretKeySelector
		hasOld   bool
		// ref is what the author's object names (create, or the update's new value).
		ref     *corev1.SecretKeySelector
		allowed bool
	}{
		{name: "create naming a Secret the author cannot get", rules: []rbacv1.PolicyRule{mcpRights}, ref: secretRef("demo-admin-password")},
		{name: "create naming a Secret the author may get", rules: []rbacv1.PolicyRule{mcpRights, getSecret("demo-admin-password")}, ref: secretRef("demo-admin-password"), allowed: true},
		{name: "create naming no Secret", rules: []rbacv1.PolicyRule{mcpRights}, allowed: true},
		{name: "update adding a Secret the author cannot get", rules: []rbacv1.PolicyRule{mcpRights}, hasOld: true, ref: secretRef("demo-admin-password")},
		{name: "update switching to a Secret the author cannot get", rules: []rbacv1.PolicyRule{mcpRights, getSecret("mcp-key")}, hasOld: true, existing: secretRef("mcp-key"), ref: secretRef("demo-admin-password")},
		{name: "update keeping the Secret an admin chose", rules: []rbacv1.PolicyRule{mcpRights}, hasOld: true, existing: secretRef("demo-admin-password"), ref: secretRef("demo-admin-password"), allowed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, "mcp-adm")
			grant(t, ns, author, nil, tc.rules...)
			u := userClient(t, author)
			m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns}}
			var err error
			if tc.hasOld {
				m.Spec.APIKeySecretRef = tc.existing
				if err := adminClient(t).Create(ctx, m); err != nil {
					t.Fatal(err)
				}
				orig := m.DeepCopy()
				m.Spec.APIKeySecretRef = tc.ref
				m.Spec.Replicas = ptr.To[int32](2)
				err = u.Patch(ctx, m, client.MergeFrom(orig))
			} else {
				m.Spec.APIKeySecretRef = tc.ref
				err = u.Create(ctx, m)
			}
			checkAdmission(t, err, tc.allowed, "spec.apiKeySecretRef", author+" may not get Secret "+ns+"/demo-admin-password")
		})
	}
}

// An APIKey acts as the user it names: issuing one, or pointing one at
// another user, needs the explicit right to act for that user.
func TestAdmissionAPIKeyNeedsImpersonate(t *testing.T) {
	installPolicies(t)
	keyRights := rbacv1.PolicyRule{APIGroups: []string{"posture.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"create", "get", "update", "patch"}}
	actFor := func(users ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{"posture.dev"}, Resources: []string{"tenantusers"}, Verbs: []string{"impersonate"}, ResourceNames: users}
	}
	cases := []struct {
		name         string
		clusterRoles []string
		rules        []rbacv1.PolicyRule
		// elsewhere grants the rules' impersonate right in another namespace only.
		elsewhere bool
		// oldUser, when set, is the user of a key the admin issued before.
		oldUser string
		user    string
		allowed bool
	}{
		// The rules of the edit ClusterRole: a bare control plane runs no
		// controller-manager to aggregate them into edit itself.
		{name: "namespace editor issuing a key for the tenant admin", clusterRoles: []string{"system:aggregate-to-edit"}, rules: []rbacv1.PolicyRule{keyRights}, user: tenantAdmin},
		{name: "bound to posture-apikey-issuer", clusterRoles: []string{"posture-apikey-issuer"}, rules: []rbacv1.PolicyRule{keyRights}, user: tenantAdmin, allowed: true},
		{name: "allowed to act for the named user only", rules: []rbacv1.PolicyRule{keyRights, actFor(ciUser)}, user: ciUser, allowed: true},
		{name: "allowed to act for another user", rules: []rbacv1.PolicyRule{keyRights, actFor(ciUser)}, user: tenantAdmin},
		{name: "allowed to act for the user in another namespace", rules: []rbacv1.PolicyRule{keyRights}, elsewhere: true, user: tenantAdmin},
		{name: "update pointing a key at another user", rules: []rbacv1.PolicyRule{keyRights, actFor(ciUser)}, oldUser: ciUser, user: tenantAdmin},
		{name: "update keeping the user (revoking)", rules: []rbacv1.PolicyRule{keyRights}, oldUser: tenantAdmin, user: tenantAdmin, allowed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, "key-adm")
			grant(t, ns, author, tc.clusterRoles, tc.rules...)
			if tc.elsewhere {
				grant(t, namespace(t, "key-adm-other"), author, nil, actFor(tc.user))
			}
			u := userClient(t, author)
			k := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: ns}}
			var err error
			if tc.oldUser != "" {
				k.Spec.User = tc.oldUser
				if err := adminClient(t).Create(ctx, k); err != nil {
					t.Fatal(err)
				}
				orig := k.DeepCopy()
				k.Spec.User = tc.user
				k.Spec.Revoked = true
				err = u.Patch(ctx, k, client.MergeFrom(orig))
			} else {
				k.Spec.User = tc.user
				err = u.Create(ctx, k)
			}
			checkAdmission(t, err, tc.allowed, "spec.user", author+" may not issue an API key acting as "+tc.user,
				"impersonate on tenantusers", "posture-apikey-issuer", "namespace "+ns)
		})
	}
}

// An Ingestion naming a ConfigMap or Secret has the operator read it and
// import its content: naming one needs the right to read it.
func TestAdmissionIngestionSourceNeedsGet(t *testing.T) {
	installPolicies(t)
	create := rbacv1.PolicyRule{APIGroups: []string{"posture.dev"}, Resources: []string{"ingestions"}, Verbs: []string{"create"}}
	get := func(resource, name string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get"}, ResourceNames: []string{name}}
	}
	ref := &posturev1.ReportKeyRef{Name: "report", Key: "report.ocsf.json"}
	ca := &posturev1.ReportKeyRef{Name: "report-ca", Key: "ca.crt"}
	cases := []struct {
		name    string
		rules   []rbacv1.PolicyRule
		source  posturev1.IngestionSource
		allowed bool
		want    []string
	}{
		{"ConfigMap the author cannot get", []rbacv1.PolicyRule{create}, posturev1.IngestionSource{ConfigMapRef: ref}, false,
			[]string{"spec.source.configMapRef", author + " may not get ConfigMap"}},
		{"ConfigMap the author may get", []rbacv1.PolicyRule{create, get("configmaps", "report")}, posturev1.IngestionSource{ConfigMapRef: ref}, true, nil},
		{"Secret the author cannot get", []rbacv1.PolicyRule{create, get("configmaps", "report")}, posturev1.IngestionSource{SecretRef: ref}, false,
			[]string{"spec.source.secretRef", author + " may not get Secret"}},
		{"Secret the author may get", []rbacv1.PolicyRule{create, get("secrets", "report")}, posturev1.IngestionSource{SecretRef: ref}, true, nil},
		{"URL with a CA Secret the author cannot get", []rbacv1.PolicyRule{create}, posturev1.IngestionSource{URL: &posturev1.URLSource{URL: "https://reports.example/r.json", CABundleSecretRef: ca}}, false,
			[]string{"spec.source.url.caBundleSecretRef", author + " may not get Secret"}},
		{"URL without a CA Secret", []rbacv1.PolicyRule{create}, posturev1.IngestionSource{URL: &posturev1.URLSource{URL: "https://reports.example/r.json"}}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, "ing-adm")
			grant(t, ns, author, nil, tc.rules...)
			ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "scan", Namespace: ns}, Spec: posturev1.IngestionSpec{Source: tc.source}}
			checkAdmission(t, userClient(t, author).Create(context.Background(), ing, client.DryRunAll), tc.allowed, tc.want...)
		})
	}
}

// An APIKey naming an existing Secret adopts the key in it: naming one
// needs the right to read it, or an issuer could make someone else's
// credential a Posture key.
func TestAdmissionAPIKeySecretNeedsGet(t *testing.T) {
	installPolicies(t)
	rights := []rbacv1.PolicyRule{{APIGroups: []string{"posture.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"create", "get", "update", "patch"}}}
	getSecret := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"scanner-key"}}
	cases := []struct {
		name      string
		rules     []rbacv1.PolicyRule
		oldSecret string // set: the admin created the key naming it, the author patches
		secret    string
		allowed   bool
	}{
		{name: "no secretName: a generated key", rules: rights, allowed: true},
		{name: "a Secret the author cannot get", rules: rights, secret: "scanner-key"},
		{name: "a Secret the author may get", rules: append([]rbacv1.PolicyRule{getSecret}, rights...), secret: "scanner-key", allowed: true},
		{name: "update keeping the Secret an admin chose (revoking)", rules: rights, oldSecret: "scanner-key", secret: "scanner-key", allowed: true},
		{name: "update switching to a Secret the author cannot get", rules: rights, oldSecret: "other", secret: "scanner-key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, "keysec-adm")
			grant(t, ns, author, []string{"posture-apikey-issuer"}, tc.rules...)
			u := userClient(t, author)
			k := &posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: ns}, Spec: posturev1.APIKeySpec{User: tenantAdmin}}
			var err error
			if tc.oldSecret != "" {
				k.Spec.SecretName = tc.oldSecret
				if err := adminClient(t).Create(ctx, k); err != nil {
					t.Fatal(err)
				}
				orig := k.DeepCopy()
				k.Spec.SecretName = tc.secret
				k.Spec.Revoked = true
				err = u.Patch(ctx, k, client.MergeFrom(orig))
			} else {
				k.Spec.SecretName = tc.secret
				err = u.Create(ctx, k, client.DryRunAll)
			}
			checkAdmission(t, err, tc.allowed, "spec.secretName", author+" may not get Secret "+ns+"/scanner-key")
		})
	}
}
