// Package demo seeds the demo tenants that make dev and make cluster start
// with (and the tenants make soak loads), as plain objects the way GitOps
// would apply them, and collects the credentials they generate for the env
// file each writes.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
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
	// Namespace is the first tenant's namespace (the demo tenant's).
	Namespace string
	// EnvVars are lines of the env file (NAME=value).
	EnvVars []string
	// Users are the seeded users with their credentials: each one's
	// password at once, each one's key once AwaitKeys has it.
	Users []Credentials
	// apiKeys are the seeded APIKeys (namespace/name) and the variable each
	// one's generated key goes to, once the manager made it.
	apiKeys []seedKey
}

// Credentials are what one seeded user signs in and calls the API with.
type Credentials struct {
	Tenant, Namespace, Email, Role string
	Password                       string
	// APIKey is filled in by AwaitKeys.
	APIKey string
}

type seedKey struct {
	namespace, name, envVar string
	user                    int // index in Users
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Tenant is one tenant to seed, as plain objects: the Tenant, its namespace
// and a password Secret and an APIKey per user.
type Tenant struct {
	Name         string
	Subscription posturev1.Subscription
	// IngestionHistory is the Tenant's history limit; nil keeps the
	// default.
	IngestionHistory *posturev1.IngestionHistory
	Users            []User
}

// User is one user of a seeded tenant, with the role admin (every
// permission) or viewer (unlimited_visibility only, so no
// manage_ingestions).
type User struct {
	Email, Role string
	// Key names the user's APIKey; its password Secret is Key+"-password".
	Key string
	// EnvVar, when set, is the env file's variable for the generated key;
	// SignIn, when set, is the prefix of the variables of the user's email
	// and password (SignIn_EMAIL, SignIn_PASSWORD).
	EnvVar, SignIn string
}

// Tenants are the demo tenants: demo (active subscription, provider limit
// 5) with an admin and a viewer, other (active) with an admin, and nosub (no
// subscription) with an admin.
var Tenants = []Tenant{
	{Name: "demo", Subscription: posturev1.Subscription{Active: true, Plan: "demo", ProviderLimit: 5}, Users: []User{
		{Email: "admin@demo.posture.dev", Role: "admin", Key: "demo-admin", EnvVar: "POSTURE_API_KEY", SignIn: "POSTURE_ADMIN"},
		{Email: "viewer@demo.posture.dev", Role: "viewer", Key: "demo-viewer", EnvVar: "POSTURE_VIEWER_API_KEY", SignIn: "POSTURE_VIEWER"},
	}},
	{Name: "other", Subscription: posturev1.Subscription{Active: true, Plan: "demo", ProviderLimit: 5}, Users: []User{
		{Email: "admin@other.posture.dev", Role: "admin", Key: "other-admin", EnvVar: "POSTURE_OTHER_API_KEY"},
	}},
	{Name: "nosub", Subscription: posturev1.Subscription{}, Users: []User{
		{Email: "admin@nosub.posture.dev", Role: "admin", Key: "nosub-admin", EnvVar: "POSTURE_NOSUB_API_KEY"},
	}},
}

// Seed applies the demo tenants (Tenants) as plain objects, the way GitOps
// would. The manager's controllers generate the keys; AwaitKeys collects
// them once the manager runs. note is told how many objects were kept from
// an earlier run.
func Seed(ctx context.Context, c client.Client, note func(string)) (*Seeded, error) {
	return SeedTenants(ctx, c, Tenants, note)
}

// SeedTenants applies tenants as plain objects, as Seed applies the demo
// tenants.
func SeedTenants(ctx context.Context, c client.Client, tenants []Tenant, note func(string)) (*Seeded, error) {
	adminRole := posturev1.Role{Name: "admin", Permissions: []posturev1.Permission{
		posturev1.PermissionManageIngestions, posturev1.PermissionManageProviders, posturev1.PermissionManageScans,
		posturev1.PermissionManageUsers, posturev1.PermissionManageAccount, posturev1.PermissionManageBilling,
		posturev1.PermissionUnlimitedVisibility, posturev1.PermissionMuteFindings,
	}}
	viewerRole := posturev1.Role{Name: "viewer", Permissions: []posturev1.Permission{posturev1.PermissionUnlimitedVisibility}}
	type passwordVar struct {
		prefix string // of the env file's variables; empty: none
		user   int
		secret types.NamespacedName
	}
	var passwords []passwordVar
	res := &Seeded{}
	if len(tenants) > 0 {
		res.Namespace = "tenant-" + tenants[0].Name
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "posture-system"}}}
	for _, tn := range tenants {
		ns := "tenant-" + tn.Name
		// The namespace is made here, not left to the Tenant controller,
		// because the password Secrets must exist before the manager starts.
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		tenant := &posturev1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: tn.Name},
			Spec: posturev1.TenantSpec{
				Namespace:        ns,
				Subscription:     tn.Subscription,
				Roles:            []posturev1.Role{adminRole, viewerRole},
				IngestionHistory: tn.IngestionHistory,
			},
		}
		for _, u := range tn.Users {
			secretName := u.Key + "-password"
			objs = append(objs, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns},
				StringData: map[string]string{"password": randomToken(18)},
			}, &posturev1.APIKey{
				ObjectMeta: metav1.ObjectMeta{Name: u.Key, Namespace: ns},
				Spec:       posturev1.APIKeySpec{User: u.Email},
			})
			tenant.Spec.Users = append(tenant.Spec.Users, posturev1.User{
				Email: u.Email, Role: u.Role, PasswordSecretRef: &posturev1.SecretKeyRef{Name: secretName, Key: "password"},
			})
			i := len(res.Users)
			res.Users = append(res.Users, Credentials{Tenant: tn.Name, Namespace: ns, Email: u.Email, Role: u.Role})
			res.apiKeys = append(res.apiKeys, seedKey{namespace: ns, name: u.Key, envVar: u.EnvVar, user: i})
			if u.SignIn != "" {
				res.EnvVars = append(res.EnvVars, u.SignIn+"_EMAIL="+u.Email)
			}
			passwords = append(passwords, passwordVar{u.SignIn, i, types.NamespacedName{Namespace: ns, Name: secretName}})
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
		res.Users[pw.user].Password = password
		if pw.prefix != "" {
			res.EnvVars = append(res.EnvVars, pw.prefix+"_PASSWORD="+password)
		}
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
					s.Users[k.user].APIKey = string(v)
					if k.envVar != "" {
						s.EnvVars = append(s.EnvVars, k.envVar+"="+string(v))
					}
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

// WriteEnv writes an env file (.dev/env, .cluster/env) that a shell sources:
// a comment line, then one export per NAME=value of vars. It is readable by
// its owner only (it holds keys and passwords) and replaced whole, so a
// reader never sources half of it.
func WriteEnv(path, comment string, vars []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", comment)
	for _, v := range vars {
		name, value, _ := strings.Cut(v, "=")
		fmt.Fprintf(&b, "export %s=%q\n", name, value)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
