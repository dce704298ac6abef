package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Field indexes of the manager's cache that authentication and the tenant
// controllers look objects up by.
const (
	// IndexAPIKeyPrefix indexes APIKeys by status.prefix (the public part of the key).
	IndexAPIKeyPrefix = "posture.dev/apikey-prefix"
	// IndexTenantNamespace indexes Tenants by the namespace they use.
	IndexTenantNamespace = "posture.dev/tenant-namespace"
	// IndexTenantUser indexes Tenants by the lower-cased email of each user.
	IndexTenantUser = "posture.dev/tenant-user"
)

// SetupIndexes registers the indexes with a manager's field indexer. It may be
// called more than once for the same manager (each component that needs the
// indexes calls it); repeated registrations are ignored.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&posturev1.APIKey{}, IndexAPIKeyPrefix, func(o client.Object) []string {
			if p := o.(*posturev1.APIKey).Status.Prefix; p != "" {
				return []string{p}
			}
			return nil
		}},
		{&posturev1.Tenant{}, IndexTenantNamespace, func(o client.Object) []string {
			return []string{o.(*posturev1.Tenant).NamespaceName()}
		}},
		{&posturev1.Tenant{}, IndexTenantUser, func(o client.Object) []string {
			t := o.(*posturev1.Tenant)
			emails := make([]string, 0, len(t.Spec.Users))
			for _, u := range t.Spec.Users {
				emails = append(emails, NormalizeEmail(u.Email))
			}
			return emails
		}},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil && !strings.Contains(err.Error(), "indexer conflict") {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// NormalizeEmail is how emails are compared: case-insensitively, trimmed.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// TenantForNamespace returns the Tenant that owns namespace ns, or nil when
// no Tenant names it. A namespace belongs to the Tenant whose label
// (posturev1.LabelTenant) it carries: the first Tenant to claim it labels it,
// and a later Tenant naming the same namespace never takes it over, so its
// existence cannot lock the owner out. Only a namespace not yet labelled falls
// back to the Tenants naming it, and several of those fail closed.
func TenantForNamespace(ctx context.Context, r client.Reader, ns string) (*posturev1.Tenant, error) {
	var list posturev1.TenantList
	if err := r.List(ctx, &list, client.MatchingFields{IndexTenantNamespace: ns}); err != nil {
		return nil, fmt.Errorf("look up the Tenant of namespace %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	var nsObj corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read namespace %s to find its Tenant: %w", ns, err)
	}
	if owner := nsObj.Labels[posturev1.LabelTenant]; err == nil && owner != "" {
		for i := range list.Items {
			if LabelValue(list.Items[i].Name) == owner {
				return &list.Items[i], nil
			}
		}
		return nil, &Error{fmt.Sprintf("namespace %s belongs to tenant %s (label %s), which does not exist; only that Tenant may use it", ns, owner, posturev1.LabelTenant)}
	}
	if len(list.Items) == 1 {
		return &list.Items[0], nil
	}
	names := make([]string, 0, len(list.Items))
	for _, t := range list.Items {
		names = append(names, t.Name)
	}
	return nil, &Error{fmt.Sprintf("namespace %s is claimed by several Tenants (%s) and carries no %s label yet; an administrator must resolve it", ns, strings.Join(names, ", "), posturev1.LabelTenant)}
}

// OwnsNamespace reports whether t is the Tenant its namespace belongs to. A
// Tenant that names another tenant's namespace must not sign its users in or
// resolve their tokens: its spec would otherwise point at the owner's Secrets
// and data.
func OwnsNamespace(ctx context.Context, r client.Reader, t *posturev1.Tenant) (bool, error) {
	owner, err := TenantForNamespace(ctx, r, t.NamespaceName())
	var ae *Error
	switch {
	case errors.As(err, &ae):
		return false, nil
	case err != nil:
		return false, err
	}
	return owner != nil && owner.Name == t.Name, nil
}

var notLabelChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// LabelValue fits a name into a label value (63 characters, alphanumeric at
// both ends); names too long keep a hash so they stay distinct. The tenant
// label of a namespace is LabelValue of the Tenant's name.
func LabelValue(s string) string {
	v := notLabelChars.ReplaceAllString(s, "-")
	if len(v) > 63 || v != s {
		sum := sha256.Sum256([]byte(s))
		v = strings.Trim(v[:min(len(v), 54)], "-._") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return strings.Trim(v, "-._")
}

// FindUser returns the tenant's user with that email.
func FindUser(t *posturev1.Tenant, email string) (posturev1.User, bool) {
	want := NormalizeEmail(email)
	for _, u := range t.Spec.Users {
		if NormalizeEmail(u.Email) == want {
			return u, true
		}
	}
	return posturev1.User{}, false
}

// FindRole returns the tenant's role with that name.
func FindRole(t *posturev1.Tenant, name string) (posturev1.Role, bool) {
	for _, r := range t.Spec.Roles {
		if r.Name == name {
			return r, true
		}
	}
	return posturev1.Role{}, false
}

// PrincipalFor builds the principal of a tenant user from the Tenant as it is
// now, so a role change applies to the user's keys and tokens at once. A user
// whose role is unknown holds no permissions.
func PrincipalFor(t *posturev1.Tenant, email, keyPrefix string) (Principal, bool) {
	u, ok := FindUser(t, email)
	if !ok {
		return Principal{}, false
	}
	perms := map[posturev1.Permission]bool{}
	if role, ok := FindRole(t, u.Role); ok {
		for _, p := range role.Permissions {
			perms[p] = true
		}
	}
	return Principal{
		Tenant:      t.Name,
		Namespace:   t.NamespaceName(),
		User:        u.Email,
		KeyPrefix:   keyPrefix,
		Permissions: perms,
		Subscribed:  t.Spec.Subscription.Active,
	}, true
}
