package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
)

// NewInProcessExecutor adds a worker pool of the given size to mgr and returns
// the executor plus the channel that tells the reconciler when an attempt ends.
func NewInProcessExecutor(mgr ctrl.Manager, worker *ingest.Worker, size int) (*InProcessExecutor, <-chan event.TypedGenericEvent[*posturev1.Ingestion], error) {
	pool := ingest.NewPool(worker, size)
	done := make(chan event.TypedGenericEvent[*posturev1.Ingestion], 256)
	pool.OnDone = func(j ingest.Attempt) {
		ing := &posturev1.Ingestion{}
		ing.Namespace, ing.Name = j.Namespace, j.IngestionID
		select {
		case done <- event.TypedGenericEvent[*posturev1.Ingestion]{Object: ing}:
		default: // the reconciler's poll catches up
		}
	}
	if err := mgr.Add(pool); err != nil {
		return nil, nil, err
	}
	return &InProcessExecutor{Pool: pool}, done, nil
}
