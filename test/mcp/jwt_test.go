package mcp_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// A real JWT from POST /api/v1/tokens works over MCP: the tool server sends
// it on as Bearer, which the CR authenticator accepts for tokens only.
func TestJWTFromTokensEndpoint(t *testing.T) {
	signing := make([]byte, 32)
	_, _ = rand.Read(signing)
	// The authenticator reads through the manager's cache, which Setup hands it.
	a := &auth.CRAuthenticator{Tokens: &auth.TokenService{Keys: auth.StaticKeySource(signing)}, BcryptCost: 4}
	env := apitest.Start(t, apitest.Options{Auth: a, Tokens: a, Setup: func(mgr ctrl.Manager, _ store.Store) error {
		if err := auth.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
		a.Reader, a.Secrets = mgr.GetClient(), mgr.GetAPIReader()
		return nil
	}})
	ctx := context.Background()
	const email, password = "agent@example.com", "correct horse battery staple"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-password", Namespace: env.Namespace},
		StringData: map[string]string{"password": password}}
	tenant := &posturev1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: env.Tenant},
		Spec: posturev1.TenantSpec{
			Namespace:    env.Namespace,
			Subscription: posturev1.Subscription{Active: true, Plan: "test"},
			Roles:        []posturev1.Role{{Name: "reader-uploader", Permissions: []posturev1.Permission{posturev1.PermissionManageIngestions}}},
			Users: []posturev1.User{{Email: email, Role: "reader-uploader",
				PasswordSecretRef: &posturev1.SecretKeyRef{Name: secret.Name, Key: "password"}}},
		},
	}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tenant) })

	jwt := signIn(t, env.URL, email, password)
	if strings.HasPrefix(jwt, "pk_") || strings.Count(jwt, ".") != 2 {
		t.Fatalf("POST /api/v1/tokens gave %.12q…, not a JWT", jwt)
	}

	srv := startHTTPServer(t, env.URL+"/api/v1")
	target := httpTarget(srv.URL, "Bearer "+jwt)
	if tools := listTools(t, target); len(tools) != len(docTools)+len(platformTools) {
		t.Errorf("tools/list with a JWT: %d tools", len(tools))
	}
	mustSucceed(t, target, "list_ingestions")
	var tu struct {
		User struct {
			Email string `json:"email"`
		} `json:"user"`
	}
	mustSucceed(t, target, "get_tenant_usage").decode(t, &tu)
	if tu.User.Email != email {
		t.Errorf("get_tenant_usage with the JWT: user %q, want %s", tu.User.Email, email)
	}
}

// signIn asks POST /api/v1/tokens for an access token, waiting for the
// manager's cache to see the new Tenant.
func signIn(t *testing.T, apiURL, email, password string) string {
	t.Helper()
	base, err := restapi.ParseBaseURL(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	api := restapi.New(base, nil, "test")
	body := restapi.NewRequest(restapi.TypeTokens, restapi.TokenRequest{Email: email, Password: password})
	var access string
	testenv.Eventually(t, 20*time.Second, "POST /api/v1/tokens to sign in", func() (bool, string) {
		resp, err := api.SendJSON(context.Background(), http.MethodPost, restapi.PathTokens, body)
		if restapi.StatusOf(err) == 0 && err != nil {
			t.Fatal(err)
		}
		var doc restapi.ResourceDocument[restapi.Token]
		if err == nil && resp.Decode(&doc) == nil && doc.Data.Attributes.Access != "" {
			access = doc.Data.Attributes.Access
			return true, ""
		}
		return false, fmt.Sprint(err)
	})
	return access
}
