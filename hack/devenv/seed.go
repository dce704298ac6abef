package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// seedResult is what the seeding hands to the manager and to .dev/env.
type seedResult struct {
	namespace   string   // the demo tenant's namespace
	managerEnv  []string // extra environment of the manager
	managerArgs []string // extra flags of the manager
	envVars     []string // extra lines of .dev/env (NAME=value)
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// seedTenants creates the demo tenant with an administrator. The API key is
// handed to the manager as its static key.
func seedTenants(ctx context.Context, c client.Client) (seedResult, error) {
	const (
		tenant = "demo"
		ns     = "tenant-demo"
		email  = "admin@demo.posture.dev"
	)
	password := randomToken(18)
	key := "pk_" + randomToken(6) + "." + randomToken(32)
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "posture-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{posturev1.LabelTenant: tenant}}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "demo-admin-password", Namespace: ns},
			StringData: map[string]string{"password": password},
		},
		&posturev1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: tenant},
			Spec: posturev1.TenantSpec{
				Namespace:    ns,
				Subscription: posturev1.Subscription{Active: true, Plan: "demo", ProviderLimit: 5},
				Roles: []posturev1.Role{{Name: "admin", Permissions: []posturev1.Permission{
					posturev1.PermissionManageIngestions, posturev1.PermissionManageProviders, posturev1.PermissionManageScans,
					posturev1.PermissionManageUsers, posturev1.PermissionManageAccount, posturev1.PermissionManageBilling,
					posturev1.PermissionUnlimitedVisbility,
				}}},
				Users: []posturev1.User{{Email: email, Role: "admin", PasswordSecretRef: &posturev1.SecretKeyRef{Name: "demo-admin-password", Key: "password"}}},
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return seedResult{}, fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return seedResult{
		namespace:   ns,
		managerEnv:  []string{"POSTURE_STATIC_API_KEY=" + key},
		managerArgs: []string{"--static-tenant=" + tenant, "--static-tenant-namespace=" + ns},
		envVars: []string{
			"POSTURE_API_KEY=" + key,
			"POSTURE_ADMIN_EMAIL=" + email,
			"POSTURE_ADMIN_PASSWORD=" + password,
		},
	}, nil
}
