package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// verdict is what one reconcile concluded about an object, in the terms
// every kind shares. Each kind has one pure function that derives it, with
// the kind's other status fields, from the facts the reconcile observed; the
// conditions follow from it in one place, so they can never disagree.
type verdict struct {
	// ready is True once the object is reconciled as declared.
	ready           metav1.ConditionStatus
	reason, message string
	// reconciling: work is in flight that ends without anyone's help
	// (kstatus: InProgress).
	reconciling bool
	// stalled: nothing changes until a person acts (kstatus: Failed).
	stalled bool
}

// apply sets Ready and, when they hold, Reconciling and Stalled, each
// stamped with the generation they describe. Reconciling and Stalled are
// "abnormal-true" conditions: absent unless True, as kstatus and Flux expect.
func (v verdict) apply(conds *[]metav1.Condition, generation int64) {
	ready := v.ready
	if ready == "" || (ready == metav1.ConditionTrue && (v.reconciling || v.stalled)) {
		// A verdict that is still working or stuck is not Ready; guard the
		// derivations against saying both.
		ready = metav1.ConditionFalse
		if v.reconciling && !v.stalled {
			ready = metav1.ConditionUnknown
		}
	}
	set := func(typ string, on bool, status metav1.ConditionStatus) {
		if !on {
			meta.RemoveStatusCondition(conds, typ)
			return
		}
		meta.SetStatusCondition(conds, metav1.Condition{
			Type: typ, Status: status, Reason: v.reason, Message: v.message, ObservedGeneration: generation,
		})
	}
	set(posturev1.ConditionReady, true, ready)
	set(posturev1.ConditionReconciling, v.reconciling && !v.stalled, metav1.ConditionTrue)
	set(posturev1.ConditionStalled, v.stalled, metav1.ConditionTrue)
}

// conflictRetry is how soon a reconcile whose status write met a conflict
// runs again: long enough for the informer to deliver the newer version.
const conflictRetry = 100 * time.Millisecond

// patchStatus writes the status of obj, changed in memory since orig was
// read, as the reconcile's one status write: a merge patch that carries
// orig's resourceVersion, and nothing at all when nothing changed. The
// optimistic lock matters: a status derived from a stale read (the cache
// behind this controller's previous write) must not overwrite a newer one,
// or an ingestion could be started twice.
//
// written is false when nothing was sent, or when the object changed or went
// away since it was read; in the latter cases res asks for a prompt retry,
// which redoes the work from the newer version (a conflict is routine, not an
// error to log).
func patchStatus(ctx context.Context, c client.Client, obj, orig client.Object) (written bool, res ctrl.Result, err error) {
	if equality.Semantic.DeepEqual(orig, obj) {
		return false, ctrl.Result{}, nil
	}
	patch, err := statusPatch(obj, orig)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	err = c.Status().Patch(ctx, obj, patch)
	switch {
	case err == nil:
		return true, ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		ctrl.LoggerFrom(ctx).V(1).Info("object changed while reconciling; retrying", "reason", err.Error())
		return false, ctrl.Result{RequeueAfter: conflictRetry}, nil
	case apierrors.IsNotFound(err):
		return false, ctrl.Result{}, nil
	}
	return false, ctrl.Result{}, fmt.Errorf("write status of %s %s/%s: %w",
		obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
}

// statusPatch is the JSON merge patch from orig to obj, carrying orig's
// resourceVersion, with every field of obj's status spelled out. A plain diff
// leaves out fields whose Go zero value did not change, yet the stored object
// may lack them (its first status write), and some are required (an
// ingestion's summary counts).
func statusPatch(obj, orig client.Object) (client.Patch, error) {
	data, err := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}).Data(obj)
	if err != nil {
		return nil, fmt.Errorf("diff status: %w", err)
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, fmt.Errorf("read status diff: %w", err)
	}
	full, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert status: %w", err)
	}
	status, _ := patch["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	// Fields the diff deletes (null) stay deleted; the others are sent whole.
	fields, _ := full["status"].(map[string]any)
	maps.Copy(status, fields)
	patch["status"] = status
	raw, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encode status patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, raw), nil
}

// finishStatus is the common end of a reconcile: write the status once and
// come back after requeue (or sooner, on a conflict).
func finishStatus(ctx context.Context, c client.Client, obj, orig client.Object, requeue time.Duration) (ctrl.Result, error) {
	_, res, err := patchStatus(ctx, c, obj, orig)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
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

// setFinalizer adds (or removes) finalizer on obj with a patch of its
// metadata alone, guarded by its resourceVersion. An Update would send the
// whole object as this controller's Go types render it, which for an object
// applied from YAML can differ from what is stored (an empty struct field
// spelled out), and an immutable spec refuses any such difference.
func setFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, present bool) (changed bool, err error) {
	orig, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("copy %T", obj)
	}
	if present {
		changed = controllerutil.AddFinalizer(obj, finalizer)
	} else {
		changed = controllerutil.RemoveFinalizer(obj, finalizer)
	}
	if !changed {
		return false, nil
	}
	return true, c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// counted words a number of things as a sentence reads it: "1 provider",
// "5 providers". Status messages are read by people, who stumble over
// "1 providers".
func counted[N ~int | ~int32 | ~int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
