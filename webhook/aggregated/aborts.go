package aggregated

import (
	"context"
	"errors"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// The generic API server's timeout and panic filters report a request they
// abandoned as an "unhandled error": "Timeout or abort while handling" and
// "Post-timeout activity". They say the same when the client went away
// (kubectl interrupted, kube-apiserver's proxy cancelled), which is no fault
// of the server's; logged at error level, an operator's alert on error lines
// takes it for one (make soak found two each time its readers stopped). A
// request whose own context was cancelled, rather than timed out, is such a
// client: those two reports are logged at debug level (V(4)), as the REST
// API's 499s are. A real timeout (a deadline, not a cancellation) still
// logs as an error.
var clientAbortMessages = map[string]bool{
	"Timeout or abort while handling": true,
	"Post-timeout activity":           true,
}

var quietAbortsOnce sync.Once

// quietClientAborts wraps the process's unhandled-error handlers once.
func quietClientAborts() {
	quietAbortsOnce.Do(func() {
		handlers := utilruntime.ErrorHandlers
		utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{
			func(ctx context.Context, err error, msg string, kv ...interface{}) {
				if ctx != nil && clientAbortMessages[msg] && errors.Is(ctx.Err(), context.Canceled) {
					klog.FromContext(ctx).V(4).Info(msg+" (the client went away)", kv...)
					return
				}
				for _, h := range handlers {
					h(ctx, err, msg, kv...)
				}
			},
		}
	})
}
