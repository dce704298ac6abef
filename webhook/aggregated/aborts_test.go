package aggregated

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// errorSink keeps the messages a logger was told at error level.
type errorSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *errorSink) Init(logr.RuntimeInfo)          {}
func (s *errorSink) Enabled(int) bool               { return false }
func (s *errorSink) Info(int, string, ...any)       {}
func (s *errorSink) WithValues(...any) logr.LogSink { return s }
func (s *errorSink) WithName(string) logr.LogSink   { return s }
func (s *errorSink) Error(_ error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
}

func (s *errorSink) errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

// The generic server's filters report an abandoned request through
// utilruntime's handlers; one abandoned because its client went away
// (its context cancelled) is no error of the server's, one that ran out
// its deadline still is, and so is anything else.
func TestClientAbortsAreNotErrors(t *testing.T) {
	quietClientAborts()
	sink := &errorSink{}
	klog.SetLogger(logr.New(sink))
	t.Cleanup(klog.ClearLogger)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancelLate := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelLate()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		msg    string
		logged bool
	}{
		{"the client went away", gone, "Timeout or abort while handling", false},
		{"the client went away, after the handler", gone, "Post-timeout activity", false},
		{"the request timed out", late, "Timeout or abort while handling", true},
		{"the request timed out, after the handler", late, "Post-timeout activity", true},
		{"another error of a cancelled request", gone, "something else", true},
		{"an error with no request", context.Background(), "Timeout or abort while handling", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(sink.errors())
			utilruntime.HandleErrorWithContext(tc.ctx, errors.New("x"), tc.msg, "method", "GET")
			if got := len(sink.errors()) > before; got != tc.logged {
				t.Errorf("%q logged as an error: %v, want %v", tc.msg, got, tc.logged)
			}
		})
	}
}
