// Package demo seeds the demo tenants that make dev and make cluster start
// with, as plain objects the way GitOps would apply them, and collects the
// credentials they generate for the env file each writes.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/pushclient"
)

// Seeded is what the seeding hands to the env file.
type Seeded struct {
	// Namespace is the demo tenant's namespace.
	Namespace string
	// EnvVars are lines of the env file (NAME=value).
	EnvVars []string
	// apiKeys are the seeded APIKeys (namespace/name) and the variable each
	// one's generated key goes to, once the manager made it.
	apiKeys []seedKey
}

type seedKey struct {
	namespace, name, envVar string
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Seed applies the demo tenants as plain objects, the way GitOps
// would: tenant demo (active subscription, provider limit 5) with an admin
// (every permission) and a viewer (no manage_ingestions), tenant other (active)
// with an admin, tenant nosub (no subscription) with an admin, a password
// Secret per user and an APIKey per user. The manager's controllers generate
// the keys; AwaitKeys collects them once the manager runs. note is told how
// many objects were kept from an earlier run.
func Seed(ctx context.Context, c client.Client, note func(string)) (*Seeded, error) {
	adminRole := posturev1.Role{Name: "admin", Permissions: []posturev1.Permission{
		posturev1.PermissionManageIngestions, posturev1.PermissionManageProviders, posturev1.PermissionManageScans,
		posturev1.PermissionManageUsers, posturev1.PermissionManageAccount, posturev1.PermissionManageBilling,
		posturev1.PermissionUnlimitedVisibility,
	}}
	viewerRole := posturev1.Role{Name: "viewer", Permissions: []posturev1.Permission{posturev1.PermissionUnlimitedVisibility}}
	type user struct{ email, role, keyName, envVar string }
	tenants := []struct {
		name  string
		sub   posturev1.Subscription
		users []user
	}{
		{"demo", posturev1.Subscription{Active: true, Plan: "demo", ProviderLimit: 5}, []user{
			{"admin@demo.posture.dev", "admin", "demo-admin", "POSTURE_API_KEY"},
			{"viewer@demo.posture.dev", "viewer", "demo-viewer", "POSTURE_VIEWER_API_KEY"},
		}},
		{"other", posturev1.Subscription{Active: true, Plan: "demo", ProviderLimit: 5}, []user{
			{"admin@other.posture.dev", "admin", "other-admin", "POSTURE_OTHER_API_KEY"},
		}},
		{"nosub", posturev1.Subscription{}, []user{
			{"admin@nosub.posture.dev", "admin", "nosub-admin", "POSTURE_NOSUB_API_KEY"},
		}},
	}

	// Users who sign in (the web UI, POST /api/v1/tokens) get their email and
	// password in the env file under this prefix.
	signIn := map[string]string{"POSTURE_API_KEY": "POSTURE_ADMIN", "POSTURE_VIEWER_API_KEY": "POSTURE_VIEWER"}
	type passwordVar struct {
		name   string
		secret types.NamespacedName
	}
	var passwords []passwordVar
	res := &Seeded{Namespace: "tenant-demo"}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "posture-system"}}}
	for _, tn := range tenants {
		ns := "tenant-" + tn.name
		// The namespace is made here, not left to the Tenant controller,
		// because the password Secrets must exist before the manager starts.
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		tenant := &posturev1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: tn.name},
			Spec: posturev1.TenantSpec{
				Namespace:    ns,
				Subscription: tn.sub,
				Roles:        []posturev1.Role{adminRole, viewerRole},
			},
		}
		for _, u := range tn.users {
			secretName := u.keyName + "-password"
			objs = append(objs, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns},
				StringData: map[string]string{"password": randomToken(18)},
			}, &posturev1.APIKey{
				ObjectMeta: metav1.ObjectMeta{Name: u.keyName, Namespace: ns},
				Spec:       posturev1.APIKeySpec{User: u.email},
			})
			tenant.Spec.Users = append(tenant.Spec.Users, posturev1.User{
				Email: u.email, Role: u.role, PasswordSecretRef: &posturev1.SecretKeyRef{Name: secretName, Key: "password"},
			})
			res.apiKeys = append(res.apiKeys, seedKey{namespace: ns, name: u.keyName, envVar: u.envVar})
			if prefix, ok := signIn[u.envVar]; ok {
				res.EnvVars = append(res.EnvVars, prefix+"_EMAIL="+u.email)
				passwords = append(passwords, passwordVar{prefix + "_PASSWORD", types.NamespacedName{Namespace: ns, Name: secretName}})
			}
		}
		objs = append(objs, tenant)
	}
	// An object kept from the last run is left as it is: whatever was changed
	// in it since is part of the data make dev keeps.
	kept := 0
	for _, o := range objs {
		err := c.Create(ctx, o)
		switch {
		case apierrors.IsAlreadyExists(err):
			kept++
		case err != nil:
			return nil, fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	if kept > 0 {
		note(fmt.Sprintf("%d of the %d demo objects were kept from the last run", kept, len(objs)))
	}
	// A password is read back, not remembered: a kept Secret holds the one
	// the last run generated.
	for _, pw := range passwords {
		var sec corev1.Secret
		if err := c.Get(ctx, pw.secret, &sec); err != nil {
			return nil, fmt.Errorf("read Secret %s: %w", pw.secret, err)
		}
		password := string(sec.Data["password"])
		if password == "" {
			return nil, fmt.Errorf("the Secret %s has no password key: restore it, or run make dev-reset to start over", pw.secret)
		}
		res.EnvVars = append(res.EnvVars, pw.name+"="+password)
	}
	return res, nil
}

// AwaitKeys waits until the manager has generated every seeded APIKey's key
// into its Secret and adds the keys to EnvVars.
func (s *Seeded) AwaitKeys(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, k := range s.apiKeys {
		for {
			var key posturev1.APIKey
			var sec corev1.Secret
			err := c.Get(ctx, types.NamespacedName{Namespace: k.namespace, Name: k.name}, &key)
			if err == nil && key.Status.SecretName != "" {
				err = c.Get(ctx, types.NamespacedName{Namespace: k.namespace, Name: key.Status.SecretName}, &sec)
				if v := sec.Data["api-key"]; err == nil && len(v) > 0 {
					s.EnvVars = append(s.EnvVars, k.envVar+"="+string(v))
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("APIKey %s/%s got no key from the manager (its status: %+v; see the manager's lines above)", k.namespace, k.name, key.Status)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// PushVars are the variables postctl push and scan --push-to-cloud read,
// for the env file: the demo admin's key (POSTURE_API_KEY among vars) and
// the API's address.
func PushVars(vars []string, apiURL string) []string {
	for _, v := range vars {
		if key, ok := strings.CutPrefix(v, "POSTURE_API_KEY="); ok {
			return []string{pushclient.EnvAPIKey + "=" + key, pushclient.EnvBaseURL + "=" + apiURL}
		}
	}
	return nil
}
