package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook"
)

// TestTokenAgainstTheAPI signs a Tenant user in through the real
// POST /api/v1/tokens and uses the JWT (POSTURE_TOKEN) for the ingestions
// commands.
func TestTokenAgainstTheAPI(t *testing.T) {
	var crauth *auth.CRAuthenticator
	env := apitest.Start(t, apitest.Options{
		Setup: func(mgr ctrl.Manager, _ store.Store) error {
			if err := auth.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
				return err
			}
			crauth = &auth.CRAuthenticator{
				Reader: mgr.GetClient(), Secrets: mgr.GetAPIReader(), BcryptCost: 4,
				Tokens: &auth.TokenService{Keys: auth.StaticKeySource([]byte("0123456789abcdef0123456789abcdef"))},
			}
			return nil
		},
		Server: func(s *webhook.Server) { s.Auth, s.Tokens = crauth, crauth },
	})
	ctx := context.Background()
	// Unique per run: a user of several tenants with one password must name the tenant.
	email := "ops-" + env.Tenant + "@example.com"
	must(t, env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "ops-password"},
		Data:       map[string][]byte{"password": []byte("correct horse battery staple")},
	}))
	tenant := &posturev1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: env.Tenant},
		Spec: posturev1.TenantSpec{
			Namespace:    env.Namespace,
			Subscription: posturev1.Subscription{Active: true},
			Roles:        []posturev1.Role{{Name: "ops", Permissions: []posturev1.Permission{posturev1.PermissionManageIngestions}}},
			Users:        []posturev1.User{{Email: email, Role: "ops", PasswordSecretRef: &posturev1.SecretKeyRef{Name: "ops-password"}}},
		},
	}
	must(t, env.Client.Create(ctx, tenant))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tenant) })

	api := envWith(EnvAPIURL, env.URL)
	var res result
	// The API reads Tenants from its cache, which sees the new one shortly.
	testenv.Eventually(t, 20*time.Second, "postctl token to sign in", func() (bool, string) {
		res = runInput(t, api, strings.NewReader("correct horse battery staple\n"), "token", "--email", email, "--password-stdin")
		return res.code == ExitOK, res.String()
	})
	token := strings.TrimSpace(res.stdout)
	if res.code != ExitOK || strings.Count(token, ".") != 2 {
		t.Fatalf("token: %s", res)
	}
	res = run(t, envWith(EnvAPIURL, env.URL, EnvToken, token), "ingestions", "list")
	if res.code != ExitOK || !strings.HasPrefix(res.stdout, "ID") {
		t.Errorf("ingestions list with the JWT: %s", res)
	}
	res = run(t, envWith(EnvAPIURL, env.URL, EnvPassword, "wrong"), "token", "--email", email)
	if res.code != ExitError || !strings.Contains(res.stderr, "HTTP 401") {
		t.Errorf("wrong password: %s", res)
	}
}
