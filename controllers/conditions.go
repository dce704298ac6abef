package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// setReady sets the one summary condition, stamped with the generation it describes.
func setReady(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               posturev1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: generation,
	})
}

// writeReady sets Ready and writes the status only when it changed (before is
// a copy of the status as read, after points at the status being built).
func writeReady(ctx context.Context, c client.Client, obj client.Object, conds *[]metav1.Condition, before, after any,
	status metav1.ConditionStatus, reason, msg string, requeue time.Duration) (ctrl.Result, error) {
	setReady(conds, obj.GetGeneration(), status, reason, msg)
	if !equality.Semantic.DeepEqual(before, after) {
		if err := c.Status().Update(ctx, obj); err != nil {
			// A conflict means the object changed meanwhile; that change
			// brings its own reconcile.
			return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(err))
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// emit records an event when a recorder is configured (some tests run without).
func emit(rec events.EventRecorder, obj runtime.Object, kind, reason, action, note string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, nil, kind, reason, action, note, args...)
	}
}

// requestsInNamespace maps an object to reconcile requests for every object of
// list's kind in namespace ns (e.g. a Tenant to its APIKeys).
func requestsInNamespace(ctx context.Context, c client.Client, list client.ObjectList, ns string) []reconcile.Request {
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list objects to reconcile", "kind", list.GetObjectKind().GroupVersionKind().Kind, "namespace", ns)
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}
