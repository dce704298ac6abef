// Package ui is the web UI: static pages and scripts embedded in the binary,
// and a cookie session in front of the REST API so that the browser never
// holds a token where script could read it.
//
// The session cookie carries the access and refresh tokens (HttpOnly, so
// page script cannot read them; SameSite=Strict and a required request
// header, so another site cannot send requests with them). Keeping the pair
// in the cookie rather than in a server-side table lets any replica serve
// any request. Sign-out ends the session on the server too
// (POST /api/v1/tokens/revoke): the store every replica reads records it, so
// a copy of the cookie, or of the tokens in it, stops working everywhere.
package ui

import (
	"bytes"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/posture-dev/posture/internal/restapi"
)

//go:embed static
var static embed.FS

const (
	// CookieName is the session cookie.
	CookieName = "posture_session"
	// CSRFHeader must be present on every request the session authenticates:
	// a form or image on another site cannot set it, and a cross-origin
	// script that sets it needs a CORS preflight the API never approves.
	CSRFHeader = "X-Posture-UI"
	// RenewBefore is how long before its access token expires a session is
	// renewed, on its next request.
	RenewBefore = 5 * time.Minute
	// SessionPath is where the UI signs in (POST) and out (DELETE).
	SessionPath = "/ui/session"
	// ConfigPath serves the API's rules the pages follow (which statuses
	// are terminal, how deep numbered pages go), read from the contract the
	// server holds, so that the script keeps no copy of its own.
	ConfigPath = "/ui/config"

	// CSP allows nothing but this origin's own scripts, styles and images:
	// no inline script, no framing, nothing from the internet.
	CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)

// UI wraps the REST API's handler with the pages and the session.
type UI struct {
	api http.Handler
	now func() time.Time

	// Refresh tokens are single use: requests that find the same session due
	// for renewal at once share one renewal instead of racing to redeem it.
	mu      sync.Mutex
	renewed map[string]renewal
}

type renewal struct {
	s  session
	at time.Time
}

// session is the cookie's content.
type session struct {
	Access    string    `json:"a"`
	Refresh   string    `json:"r"`
	ExpiresAt time.Time `json:"e"`
}

// Wrap returns a handler serving the UI at / and its session, and the REST
// API (api) under /api/ for both API clients and the UI's session.
func Wrap(api http.Handler, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	u := &UI{api: api, now: now, renewed: map[string]renewal{}}
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	files := http.FileServerFS(assets)
	mux := http.NewServeMux()
	mux.Handle("/api/", http.HandlerFunc(u.serveAPI))
	mux.Handle("/healthz", api)
	mux.HandleFunc(SessionPath, u.serveSession)
	mux.Handle(ConfigPath, pageHeaders(http.HandlerFunc(serveConfig)))
	mux.Handle("/assets/", pageHeaders(files))
	// The application has one page; its views live in the URL fragment.
	page := pageHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, assets, "index.html")
	}))
	mux.Handle("/{$}", page)
	// {app_url}/scans is the link to the Scans page that postctl prints after
	// a push (the spec's wording); the page's default view is that page.
	mux.Handle("/scans", page)
	// Any other path is the API's to answer (a JSON:API 404, counted in
	// its metrics as unmatched), still with the page headers.
	mux.Handle("/", pageHeaders(api))
	return mux
}

// config is what ConfigPath answers.
var config = map[string]any{
	"terminal_statuses": restapi.TerminalStatuses,
	"max_page_offset":   restapi.MaxPageOffset,
	"max_page_size":     restapi.MaxPageSize,
	"report_suffix":     restapi.ReportSuffix,
}

func serveConfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed on "+ConfigPath)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(config)
}

func pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		// A new binary may ship new assets under the same names.
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// serveAPI passes API clients through untouched and turns a session cookie
// into the Bearer token the API authenticates.
func (u *UI) serveAPI(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(CookieName)
	if err != nil || r.Header.Get("Authorization") != "" {
		u.api.ServeHTTP(w, r)
		return
	}
	if r.Header.Get(CSRFHeader) == "" && !isDownload(r) {
		writeError(w, http.StatusForbidden, "csrf_header_missing", "a request authenticated by the UI session cookie must carry the "+CSRFHeader+" header")
		return
	}
	s, ok := decodeSession(c.Value)
	if !ok {
		clearCookie(w, r)
		writeError(w, http.StatusUnauthorized, "not_authenticated", "the UI session cookie is malformed; sign in again")
		return
	}
	if u.now().Add(RenewBefore).After(s.ExpiresAt) {
		renewedSession, err := u.renew(r, s)
		switch {
		case err == nil:
			s = renewedSession
			setCookie(w, r, s)
		case u.now().Before(s.ExpiresAt):
			// The access token still works; the next request tries again.
		default:
			clearCookie(w, r)
			writeError(w, http.StatusUnauthorized, "not_authenticated", "the UI session expired and could not be renewed ("+err.Error()+"); sign in again")
			return
		}
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.Access)
	r.Header.Del("Cookie")
	sw := &statusWriter{ResponseWriter: w}
	u.api.ServeHTTP(sw, r)
}

// DownloadPaths are the API's exports, which the Findings page offers as
// links: a browser saves what a link answers straight to disk, however
// large, where a script's fetch would hold the whole file in memory, but a
// link cannot send CSRFHeader. A GET of these needs no header: it changes
// nothing, another site cannot read its answer, and SameSite=Strict keeps
// the cookie off the requests another site starts, links included.
var DownloadPaths = []string{"/api/v1/findings/export", "/api/v1/findings/latest/export"}

func isDownload(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	for _, p := range DownloadPaths {
		if r.URL.Path == p {
			return true
		}
	}
	return false
}

// statusWriter ends the session when the API rejects its token: the user was
// removed or the token revoked, and the page should return to sign-in.
type statusWriter struct {
	http.ResponseWriter
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote && code == http.StatusUnauthorized {
		s.Header().Add("Set-Cookie", (&http.Cookie{Name: CookieName, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode}).String())
	}
	s.wrote = true
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (upload deadlines).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (u *UI) renew(r *http.Request, s session) (session, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	for k, v := range u.renewed {
		if now.Sub(v.at) > time.Minute {
			delete(u.renewed, k)
		}
	}
	if v, ok := u.renewed[s.Refresh]; ok {
		return v.s, nil
	}
	body, _ := json.Marshal(map[string]any{"data": map[string]any{"type": "tokens-refresh", "attributes": map[string]string{"refresh": s.Refresh}}})
	next, err := u.tokens(r, "/api/v1/tokens/refresh", body)
	if err != nil {
		return session{}, err
	}
	u.renewed[s.Refresh] = renewal{s: next, at: now}
	return next, nil
}

// tokens calls a token endpoint of the API in process, so sign-in goes
// through the same rate limit, checks and log lines as any other client's.
func (u *UI) tokens(r *http.Request, path string, body []byte) (session, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return session{}, err
	}
	req.RemoteAddr = r.RemoteAddr
	req.Host = r.Host
	req.Header.Set("Content-Type", "application/vnd.api+json")
	req.Header.Set("Accept", "application/vnd.api+json")
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	u.api.ServeHTTP(rec, req)
	if rec.code != http.StatusOK {
		return session{}, &apiFailure{code: rec.code, header: rec.header, body: rec.body.Bytes()}
	}
	var doc struct {
		Data struct {
			Attributes struct {
				Access          string `json:"access"`
				Refresh         string `json:"refresh"`
				AccessExpiresAt string `json:"access_expires_at"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.body.Bytes(), &doc); err != nil {
		return session{}, errors.New("the token endpoint answered with a document that is not JSON")
	}
	a := doc.Data.Attributes
	exp, err := time.Parse(time.RFC3339, a.AccessExpiresAt)
	if err != nil || a.Access == "" || a.Refresh == "" {
		return session{}, errors.New("the token endpoint's answer lacks a token or its expiry")
	}
	return session{Access: a.Access, Refresh: a.Refresh, ExpiresAt: exp}, nil
}

// apiFailure is a token endpoint's error answer, passed on to the browser.
type apiFailure struct {
	code   int
	header http.Header
	body   []byte
}

func (e *apiFailure) Error() string {
	var doc struct {
		Errors []struct {
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if json.Unmarshal(e.body, &doc) == nil && len(doc.Errors) > 0 {
		return doc.Errors[0].Detail
	}
	return http.StatusText(e.code)
}

// serveSession is POST (sign in with email and password) and DELETE (sign
// out) of the session. Sign-in takes the body of POST /api/v1/tokens.
func (u *UI) serveSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Header.Get(CSRFHeader) == "" {
		// Also keeps another site from signing a visitor in to its account.
		writeError(w, http.StatusForbidden, "csrf_header_missing", "requests to "+SessionPath+" must carry the "+CSRFHeader+" header")
		return
	}
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "file_too_large", "the sign-in body is larger than 64 KiB")
			return
		}
		s, err := u.tokens(r, "/api/v1/tokens", body)
		var af *apiFailure
		if errors.As(err, &af) {
			for _, k := range []string{"Content-Type", "Retry-After"} {
				if v := af.header.Get(k); v != "" {
					w.Header().Set(k, v)
				}
			}
			w.WriteHeader(af.code)
			_, _ = w.Write(af.body)
			return
		}
		if err != nil {
			writeError(w, http.StatusBadGateway, "server_error", err.Error())
			return
		}
		setCookie(w, r, s)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		clearCookie(w, r)
		if c, err := r.Cookie(CookieName); err == nil {
			if s, ok := decodeSession(c.Value); ok {
				if err := u.endSession(r, s); err != nil {
					writeError(w, http.StatusBadGateway, "server_error", "signed out of this browser, but the server could not end the session ("+err.Error()+"); its tokens stay valid until they expire")
					return
				}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "DELETE, POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed on "+SessionPath)
	}
}

// endSession ends the session on the server through the API, in process. The
// refresh token is tried first, as it lives longest; a token that is no
// longer valid (401) has nothing left to end.
func (u *UI) endSession(r *http.Request, s session) error {
	for _, token := range []string{s.Refresh, s.Access} {
		body, _ := json.Marshal(map[string]any{"data": map[string]any{"type": "tokens-revoke", "attributes": map[string]string{"token": token}}})
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/api/v1/tokens/revoke", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.RemoteAddr = r.RemoteAddr
		req.Host = r.Host
		req.Header.Set("Content-Type", "application/vnd.api+json")
		req.Header.Set("Accept", "application/vnd.api+json")
		rec := &recorder{header: http.Header{}, code: http.StatusOK}
		u.api.ServeHTTP(rec, req)
		switch {
		case rec.code == http.StatusNoContent:
			return nil
		case rec.code == http.StatusUnauthorized:
			continue
		default:
			return &apiFailure{code: rec.code, header: rec.header, body: rec.body.Bytes()}
		}
	}
	return nil
}

func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, s session) {
	b, _ := json.Marshal(s)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: base64.RawURLEncoding.EncodeToString(b), Path: "/",
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode,
	})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
}

func decodeSession(v string) (session, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return session{}, false
	}
	var s session
	if json.Unmarshal(b, &s) != nil || s.Access == "" || s.Refresh == "" || s.ExpiresAt.IsZero() {
		return session{}, false
	}
	return s, true
}

func writeError(w http.ResponseWriter, code int, errCode, detail string) {
	w.Header().Set("Content-Type", "application/vnd.api+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"status": strconv.Itoa(code), "code": errCode, "detail": detail}}})
}

type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
