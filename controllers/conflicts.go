package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// conflictRetry is how soon a reconcile that met a conflict runs again: long
// enough for the informer to deliver the newer version it lost to.
const conflictRetry = 100 * time.Millisecond

// quietConflicts makes an optimistic-concurrency conflict a requeue instead of
// an error. Every write of a reconciler carries the resourceVersion it read,
// so a conflict only says that the object changed since (a user added a
// label, or the cache had not yet caught up with this controller's previous
// status write); the next reconcile redoes the work from the newer version.
// Returned as an error, controller-runtime would log it as "Reconciler error"
// for what is routine. Every controller is wrapped, so the rule has one home.
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
