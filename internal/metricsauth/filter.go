// Package metricsauth guards the manager's /metrics endpoint: kube-apiserver
// authenticates the caller's bearer token (TokenReview) and authorizes get
// on the path (SubjectAccessReview), as controller-runtime's
// filters.WithAuthenticationAndAuthorization does, except that a token
// kube-apiserver does not accept is a 401. controller-runtime's filter
// answers it with 500 "Authentication failed": the bearer token
// authenticator reports a rejected token as an error, which it cannot tell
// from kube-apiserver being unreachable.
package metricsauth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationapi "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/util/webhook"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// retry is controller-runtime's backoff for both reviews.
var retry = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Filter is a metricsserver.Options.FilterProvider.
func Filter(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	tokens := tokencache.New(&reviewer{client: authn.TokenReviews()}, false, time.Minute, 10*time.Second)
	authorizerConfig := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &retry,
	}
	authorize, err := authorizerConfig.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorizer: %w", err)
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			token, ok := bearer(req)
			if !ok {
				http.Error(w, "Unauthorized: send Authorization: Bearer <a token kube-apiserver accepts>", http.StatusUnauthorized)
				return
			}
			res, ok, err := tokens.AuthenticateToken(req.Context(), token)
			if err != nil {
				log.Error(err, "TokenReview of a metrics request failed")
				http.Error(w, "Authentication failed: kube-apiserver could not review the token", http.StatusInternalServerError)
				return
			}
			if !ok {
				http.Error(w, "Unauthorized: kube-apiserver does not accept the bearer token", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
			decision, reason, err := authorize.Authorize(req.Context(), attrs)
			if err != nil {
				msg := fmt.Sprintf("Authorization for user %s failed", res.User.GetName())
				log.Error(err, msg)
				http.Error(w, msg, http.StatusInternalServerError)
				return
			}
			if decision != authorizer.DecisionAllow {
				log.V(4).Info("metrics request denied", "user", res.User.GetName(), "reason", reason)
				http.Error(w, fmt.Sprintf("Authorization denied for user %s", res.User.GetName()), http.StatusForbidden)
				return
			}
			handler.ServeHTTP(w, req)
		}), nil
	}, nil
}

// bearer is the request's bearer token, if it sends one.
func bearer(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// reviewer asks kube-apiserver whether a token is valid. A token it does not
// accept is (nil, false, nil); an error is kube-apiserver not answering.
type reviewer struct {
	client authenticationv1.TokenReviewInterface
}

func (r *reviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	var result *authenticationapi.TokenReview
	err := webhook.WithExponentialBackoff(ctx, retry, func() error {
		var err error
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		result, err = r.client.Create(ctx, &authenticationapi.TokenReview{Spec: authenticationapi.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	}, webhook.DefaultShouldRetry)
	if err != nil {
		return nil, false, err
	}
	if !result.Status.Authenticated {
		return nil, false, nil
	}
	u := result.Status.User
	var extra map[string][]string
	if len(u.Extra) > 0 {
		extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}}, true, nil
}
