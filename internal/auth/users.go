package auth

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Field indexes of the manager's cache that authentication and the APIKey
// controller look objects up by.
const (
	// IndexAPIKeyPrefix indexes APIKeys by status.prefix (the public part of the key).
	IndexAPIKeyPrefix = "posture.dev/apikey-prefix"
	// IndexTenantUser indexes Tenants by the lower-cased email of each user.
	IndexTenantUser = "posture.dev/tenant-user"
)

// SetupIndexes registers the indexes with a manager's field indexer, and
// tenancy's, which resolving a key's tenant reads. It may be called more
// than once for the same manager (each component that needs the indexes
// calls it); repeated registrations are ignored.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := tenancy.SetupIndexes(ctx, indexer); err != nil {
		return err
	}
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
		Subscribed:  tenancy.Subscribed(t),
	}, true
}
