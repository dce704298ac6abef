package controllers_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/testenv"
)

// TestOneStatusWritePerReconcile watches an Ingestion from its creation: the
// reconcile that accepts and starts it writes its status once, already
// processing (pending and the start are one transition), and a running
// ingestion whose progress does not move is not written again.
func TestOneStatusWritePerReconcile(t *testing.T) {
	st := newStore(t)
	jobNS := newNamespace(t, "posture-system")
	ns := newNamespace(t, "tenant")
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := wc.Watch(ctx, &posturev1.IngestionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The Job executor's Job never runs here, so the ingestion stays
	// processing, polled every 100 ms.
	runWithJobs(t, st, jobNS)
	ing := upload(t, st, "acme", ns, testenv.Fixture("aws_3_records.ocsf.json"))

	var writes []posturev1.IngestionStatus
	quiet := time.After(25 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			got, isIng := ev.Object.(*posturev1.Ingestion)
			if !isIng || got.Name != ing.Name || ev.Type != watch.Modified {
				continue
			}
			writes = append(writes, got.Status)
			if len(writes) == 1 {
				// Once processing, a second of polls must write nothing.
				quiet = time.After(time.Second)
			}
		case <-quiet:
			done = true
		}
	}
	if len(writes) != 1 {
		phases := make([]posturev1.IngestionPhase, 0, len(writes))
		for _, s := range writes {
			phases = append(phases, s.Phase)
		}
		t.Fatalf("status written %d times (phases %v), want once", len(writes), phases)
	}
	first := writes[0]
	if first.Phase != posturev1.IngestionProcessing || first.Summary.Total != ing.Spec.RecordCount ||
		!meta.IsStatusConditionTrue(first.Conditions, posturev1.ConditionReconciling) ||
		meta.IsStatusConditionPresentAndEqual(first.Conditions, posturev1.ConditionReady, metav1.ConditionTrue) {
		t.Errorf("first write = %+v, want processing with the total, Reconciling=True, not Ready", first)
	}
}
