package webhook

import (
	"errors"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/tenancy"
)

func (s *Server) tenantRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/tenant", s.methods(map[string]handlerFunc{http.MethodGet: s.getTenant}))
}

// authenticate is authorize without the subscription and permission checks:
// for what a member of any tenant may read, even one without a subscription
// (how else would it learn that it has none).
func (s *Server) authenticate(r *http.Request) (auth.Principal, error) {
	if p, ok := principalFrom(r); ok {
		return p, nil
	}
	p, err := s.Auth.Authenticate(r)
	if err != nil {
		var ae *auth.Error
		if !errors.As(err, &ae) {
			return auth.Principal{}, err
		}
		e := newError(401, CodeNotAuthenticated, ae.Reason).headerSource("Authorization")
		e.header = http.Header{"Www-Authenticate": {`Api-Key realm="posture"`}}
		return auth.Principal{}, e
	}
	return p, nil
}

// getTenant is GET /api/v1/tenant: the caller's tenant, its subscription and
// how many providers it is billed for against the plan's limit. Any member may
// read it, with or without a subscription.
func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(r)
	if err != nil {
		return err
	}
	for name := range r.URL.Query() {
		return errorf(400, CodeInvalid, "unknown query parameter %q", name).parameter(name)
	}
	sub := map[string]any{"active": p.Subscribed, "plan": "", "provider_limit": 0}
	var limit int32
	count := 0
	var remaining any // null: unlimited
	var t posturev1.Tenant
	err = s.Client.Get(r.Context(), types.NamespacedName{Name: p.Tenant}, &t)
	switch {
	case err == nil:
		u := tenancy.UsageOf(&t)
		limit, count = u.Limit, u.Billed
		sub = map[string]any{"active": tenancy.Subscribed(&t), "plan": t.Spec.Subscription.Plan, "provider_limit": limit}
		if !u.Unlimited() {
			remaining = u.Remaining
		}
	case apierrors.IsNotFound(err):
		// A static-key install has no Tenant object, so no plan bills a
		// provider: report what the key says.
	default:
		return err
	}
	perms := make([]string, 0, len(p.Permissions))
	for perm, ok := range p.Permissions {
		if ok {
			perms = append(perms, string(perm))
		}
	}
	slices.Sort(perms)
	writeJSON(w, http.StatusOK, document{
		Data: resource{Type: "tenants", ID: p.Tenant, Attributes: map[string]any{
			"name":         p.Tenant,
			"namespace":    p.Namespace,
			"subscription": sub,
			"providers":    map[string]any{"count": count, "limit": limit, "remaining": remaining},
			"user":         map[string]any{"email": p.User, "permissions": perms},
		}, Links: map[string]any{"self": absoluteURL(r, mustURL("/api/v1/tenant"))}},
		Meta: meta{Version: APIVersion},
	})
	return nil
}
