package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// postctl's success message links to {app_url}/scans (the spec's Scans
// page); on a self-hosted manager {app_url} is the API's own address, so that
// path must be the web UI's page, not the API's 404.
func TestScansLinkServesThePage(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "api 404", http.StatusNotFound)
	})
	h := Wrap(api, nil)
	root := httptest.NewRecorder()
	h.ServeHTTP(root, httptest.NewRequest(http.MethodGet, "/", nil))
	for _, path := range []string{"/", "/scans"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Errorf("GET %s = %d %q, want the web UI's page", path, rec.Code, rec.Header().Get("Content-Type"))
			continue
		}
		if rec.Body.String() != root.Body.String() {
			t.Errorf("GET %s serves another document than GET /", path)
		}
		if rec.Header().Get("Content-Security-Policy") != CSP {
			t.Errorf("GET %s lacks the page headers", path)
		}
	}
	// Other paths stay the API's.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scans/x", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /scans/x = %d, want the API's 404", rec.Code)
	}
}
