package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/webhook"
)

// errorLog keeps what a logger was told at error level.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Init(logr.RuntimeInfo)          {}
func (l *errorLog) Enabled(int) bool               { return true }
func (l *errorLog) Info(int, string, ...any)       {}
func (l *errorLog) WithValues(...any) logr.LogSink { return l }
func (l *errorLog) WithName(string) logr.LogSink   { return l }
func (l *errorLog) Error(err error, msg string, _ ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, msg+": "+err.Error())
}

func (l *errorLog) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// A client that goes away (closes its connection, or gives up at its own
// deadline) ends the request's context, and the store call under it fails
// with "context canceled". Nobody reads the answer and the server did
// nothing wrong: it must not count as a 500 in posture_api_requests_total
// nor log an error with a stack trace, which an operator's 5xx alert would
// take for a server fault. make soak found such 500s in the manager's log
// each time its readers stopped. It is counted as 499, nginx's "client
// closed request".
func TestClientGoneIsNotAServerError(t *testing.T) {
	log := &errorLog{}
	env := apitest.Start(t, apitest.Options{Server: func(s *webhook.Server) { s.Log = logr.New(log) }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, path := range []string{"/api/v1/findings", "/api/v1/findings/counts?group_by=severity", "/api/v1/scans"} {
		req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
		req.Header.Set("Authorization", env.Authorization())
		rec := httptest.NewRecorder()
		env.Server.Handler().ServeHTTP(rec, req)
		if rec.Code != 499 {
			t.Errorf("GET %s by a client that went away: %d %s, want 499", path, rec.Code, rec.Body)
		}
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Errorf("a client going away was logged as a server error: %q", errs)
	}
}
