package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// quietConflicts makes an optimistic-concurrency conflict of an object write
// (a namespace label, a Deployment) a requeue instead of an error: it only
// says the object changed since it was read, and the next reconcile redoes
// the work from the newer version. Returned as an error, controller-runtime
// would log it as "Reconciler error" for what is routine. Status writes
// handle their own conflicts (patchStatus).
func quietConflicts(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && apierrors.IsConflict(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("object changed while reconciling; retrying", "reason", err.Error())
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return res, err
	})
}
