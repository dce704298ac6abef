// Package webhook is the HTTP front door of the manager: the JSON:API REST API
// (authentication, upload streaming, reads) served on every replica.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
)

// DefaultMaxUploadBytes bounds one uploaded report (413 past it).
const DefaultMaxUploadBytes int64 = 1 << 30

// Server serves the REST API.
type Server struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the API server directly; used when the cache has not
	// seen an object yet (a GET right after the POST that created it).
	APIReader      client.Reader
	Store          store.Store
	Auth           auth.Authenticator
	Log            logr.Logger
	Addr           string
	MaxUploadBytes int64
	Now            func() time.Time
	// TLSCertFile and TLSKeyFile, when set, make the API serve HTTPS only,
	// with the pair read again whenever the files change (a renewed
	// certificate needs no restart).
	TLSCertFile, TLSKeyFile string

	handler http.Handler
}

// Handler builds (once) and returns the API's handler.
func (s *Server) Handler() http.Handler {
	if s.handler == nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		// Each area of the API registers its own routes from its own file.
		for _, register := range []func(*http.ServeMux){s.ingestionRoutes, s.findingRoutes, s.scanRoutes, s.providerRoutes, s.schemaRoutes, s.tokenRoutes, s.tenantRoutes} {
			register(mux)
		}
		mux.Handle("/api/", s.methods(nil))
		s.handler = s.recoverer(mux)
	}
	return s.handler
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// methods dispatches by method and renders returned errors as JSON:API errors.
func (s *Server) methods(byMethod map[string]handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := byMethod[r.Method]
		if !ok {
			if byMethod == nil {
				writeError(w, errorf(404, CodeNotFound, "no endpoint at %s", r.URL.Path))
				return
			}
			allowed := make([]string, 0, len(byMethod))
			for m := range byMethod {
				allowed = append(allowed, m)
			}
			slices.Sort(allowed)
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, errorf(405, CodeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
			return
		}
		if !acceptsJSONAPI(r.Header.Get("Accept")) {
			writeError(w, errorf(406, CodeNotAcceptable, "responses are %s; the Accept header allows none of it", MediaType).headerSource("Accept"))
			return
		}
		if err := h(w, r); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				s.Log.Error(err, "request failed", "method", r.Method, "path", r.URL.Path)
				ae = newError(500, CodeServerError, "internal error; the server log has the details")
			}
			writeError(w, ae)
		}
	})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Log.Error(nil, "panic serving request", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, newError(500, CodeServerError, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authorize authenticates the caller and checks subscription and permission,
// in the order of DESIGN §7: 401, then 402, then 403.
func (s *Server) authorize(r *http.Request, perm posturev1.Permission) (auth.Principal, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return auth.Principal{}, err
	}
	if !p.Subscribed {
		return auth.Principal{}, newError(402, CodeSubscriptionRequired, "the API needs an active subscription; tenant "+p.Tenant+" has none")
	}
	if perm != "" && !p.Can(perm) {
		return auth.Principal{}, errorf(403, CodePermissionDenied, "the user behind this credential lacks the %s permission; an administrator must grant it", perm)
	}
	return p, nil
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Start serves until ctx ends (manager.Runnable).
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{
		Addr:              s.Addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	if s.TLSCertFile != "" || s.TLSKeyFile != "" {
		watcher, err := certwatcher.New(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("load the API's TLS certificate %s and key %s: %w", s.TLSCertFile, s.TLSKeyFile, err)
		}
		go func() {
			if err := watcher.Start(ctx); err != nil {
				s.Log.Error(err, "watching the API's TLS certificate stopped; the last one loaded stays in use", "cert", s.TLSCertFile)
			}
		}()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate}
		go func() { errc <- srv.ListenAndServeTLS("", "") }()
	} else {
		go func() { errc <- srv.ListenAndServe() }()
	}
	s.Log.Info("serving the REST API", "addr", s.Addr, "tls", srv.TLSConfig != nil)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// NeedLeaderElection is false: every replica serves the API.
func (s *Server) NeedLeaderElection() bool { return false }
