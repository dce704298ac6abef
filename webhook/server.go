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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
	"github.com/posture-dev/posture/internal/uploads"
	"github.com/posture-dev/posture/webhook/ui"
)

// DefaultMaxUploadBytes bounds one uploaded report (413 past it).
const DefaultMaxUploadBytes = uploads.DefaultMaxBytes

// Server serves the REST API and the web UI.
type Server struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the API server directly; used when the cache has not
	// seen an object yet (a GET right after the POST that created it).
	APIReader client.Reader
	// Store answers the reads of findings, scans and error rows, and
	// stores uploaded reports.
	Store interface {
		store.FindingReads
		store.IngestionErrors
		store.Blobs
	}
	Auth auth.Authenticator
	// Tokens issues and ends the JWTs of tenant users (POST
	// /api/v1/tokens, /refresh, /revoke); nil answers those 404, for a
	// server that authenticates a static key.
	Tokens TokenIssuer
	// RateLimit limits each authenticated caller (nil: no limit).
	RateLimit      *RateLimiter
	Log            logr.Logger
	Addr           string
	MaxUploadBytes int64
	Now            func() time.Time
	// SignIn limits password sign-in; nil applies the defaults.
	SignIn *SignInGuard
	// ShutdownDrain is how long requests in flight may run on once a
	// shutdown begins (DefaultShutdownDrain when zero).
	ShutdownDrain time.Duration
	// TLSCertFile and TLSKeyFile, when set, make the API serve HTTPS only,
	// with the pair read again whenever the files change (a renewed
	// certificate needs no restart).
	TLSCertFile, TLSKeyFile string

	handler   http.Handler
	listening atomic.Bool
	draining  atomic.Bool
	cutOff    atomic.Bool
}

// DefaultShutdownDrain is what requests in flight get to finish on shutdown:
// an upload of a report at the default size limit over a fast link. It stays
// below the Helm chart's terminationGracePeriodSeconds.
const DefaultShutdownDrain = 25 * time.Second

// StatusClientClosedRequest is what a request its client abandoned is
// counted as: nginx's 499, "client closed request". Nobody receives it.
const StatusClientClosedRequest = 499

// RetryAfterRestart is the Retry-After of a request cut off by a restart:
// time for the Service to route to another replica, or for this one to return.
const RetryAfterRestart = 5

func (s *Server) shutdownDrain() time.Duration {
	if s.ShutdownDrain > 0 {
		return s.ShutdownDrain
	}
	return DefaultShutdownDrain
}

// Ready is the API's readiness check: false until it listens, and false
// again from the moment a shutdown begins, so no new work is routed to a
// replica that is draining.
func (s *Server) Ready(*http.Request) error {
	switch {
	case s.draining.Load():
		return errors.New("the REST API is draining for shutdown")
	case !s.listening.Load():
		return errors.New("the REST API is not listening yet")
	}
	return nil
}

// Handler builds (once) and returns the API's handler.
func (s *Server) Handler() http.Handler {
	if s.handler == nil {
		if s.SignIn == nil {
			s.SignIn = &SignInGuard{}
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		// Each area of the API registers its own routes from its own file.
		for _, register := range []func(*http.ServeMux){s.ingestionRoutes, s.findingRoutes, s.scanRoutes, s.providerRoutes, s.schemaRoutes, s.tokenRoutes, s.tenantRoutes, s.muteRoutes} {
			register(mux)
		}
		mux.Handle("/api/", s.methods(nil))
		// The web UI shares the API's origin, so it needs no CORS.
		// Metrics label API requests by the API mux's pattern, which a
		// request the UI forwards (a clone carrying the session's token)
		// still gets: so the instrument sits inside the UI, around the API.
		s.handler = s.recoverer(ui.Wrap(instrument(s.RateLimit.Middleware(s.Auth, mux)), s.Now))
	}
	return s.handler
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// methods dispatches by method and renders returned errors as JSON:API errors.
func (s *Server) methods(byMethod map[string]handlerFunc) http.Handler {
	return s.dispatch(byMethod, true)
}

// methodsNegotiated is methods for handlers that answer in other media
// types than JSON:API (exports) and check the Accept header themselves.
func (s *Server) methodsNegotiated(byMethod map[string]handlerFunc) http.Handler {
	return s.dispatch(byMethod, false)
}

func (s *Server) dispatch(byMethod map[string]handlerFunc, jsonAPIOnly bool) http.Handler {
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
		if jsonAPIOnly && !acceptsJSONAPI(r.Header.Values("Accept")) {
			writeError(w, errorf(406, CodeNotAcceptable, "responses are %s (also readable as application/json); the Accept header allows neither", MediaType).headerSource("Accept"))
			return
		}
		if aerr := checkQuery(r); aerr != nil {
			writeError(w, aerr)
			return
		}
		if err := h(w, r); err != nil {
			var ae *apiError
			switch {
			case s.cutOff.Load() && r.Context().Err() != nil:
				// The server ended this request, not the client: whatever
				// the handler made of the broken read or cancelled call, the
				// client did nothing wrong and may simply retry.
				w.Header().Set("Connection", "close")
				ae = errorf(503, CodeUnavailable, "the server is restarting and stopped this request after draining for %s; retry it", s.shutdownDrain())
				ae.header = http.Header{"Retry-After": {strconv.Itoa(RetryAfterRestart)}}
			case errors.As(err, &ae):
			case r.Context().Err() != nil:
				// The client went away (closed its connection, or gave up at
				// its deadline) and the handler stopped with it: nobody reads
				// this answer and the server did nothing wrong, so it is
				// neither a 500 in the metrics nor an error in the log.
				s.Log.V(1).Info("request abandoned by the client", "method", r.Method, "path", r.URL.Path, "error", err.Error())
				w.WriteHeader(StatusClientClosedRequest)
				return
			default:
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
// in the documented order (docs/api.md): 401, then 402, then 403.
func (s *Server) authorize(r *http.Request, perm posturev1.Permission) (auth.Principal, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return auth.Principal{}, err
	}
	if err := tenancy.Gate(p.Tenant, p.Subscribed); err != nil {
		return auth.Principal{}, newError(402, CodeSubscriptionRequired, err.Error())
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

// Start serves until ctx ends (manager.Runnable), then drains: readiness
// turns false and the listener closes at once, so new connections are
// refused, while requests in flight run on for the drain period with their
// contexts intact. Whatever still runs after it is cut off and answers 503
// with Retry-After.
func (s *Server) Start(ctx context.Context) error {
	// Request contexts do not end with ctx, the manager's: a shutdown must
	// not look to a handler like a client that went away.
	base, cutoff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutoff()
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("REST API: %w", err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	if s.TLSCertFile != "" || s.TLSKeyFile != "" {
		watcher, err := certwatcher.New(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("load the API's TLS certificate %s and key %s: %w", s.TLSCertFile, s.TLSKeyFile, err)
		}
		go func() {
			if err := watcher.Start(ctx); err != nil {
				s.Log.Error(err, "watching the API's TLS certificate stopped; the last one loaded stays in use", "cert", s.TLSCertFile)
			}
		}()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate}
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	s.listening.Store(true)
	s.Log.Info("serving the REST API", "addr", ln.Addr().String(), "tls", srv.TLSConfig != nil)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Shutdown closes the listeners first, then runs this: readiness fails
	// only once no new connection can be accepted, never in between.
	srv.RegisterOnShutdown(func() { s.draining.Store(true) })
	s.Log.Info("shutting down: draining requests in flight", "drain", s.shutdownDrain())
	drain, cancel := context.WithTimeout(context.Background(), s.shutdownDrain())
	defer cancel()
	if err := srv.Shutdown(drain); !errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	s.Log.Info("drain period over: cutting off the requests still in flight", "drain", s.shutdownDrain())
	s.cutOff.Store(true)
	cutoff()
	// Cut-off handlers answer at once; give them a moment to write the 503.
	last, cancelLast := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelLast()
	if err := srv.Shutdown(last); errors.Is(err, context.DeadlineExceeded) {
		return srv.Close()
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the API.
func (s *Server) NeedLeaderElection() bool { return false }
