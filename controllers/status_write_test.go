package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
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
	// The finalizer goes on with a metadata write, which leaves the status
	// as it was: only writes that change the status count.
	var last posturev1.IngestionStatus
	quiet := time.After(25 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			got, isIng := ev.Object.(*posturev1.Ingestion)
			if !isIng || got.Name != ing.Name || ev.Type != watch.Modified || equality.Semantic.DeepEqual(got.Status, last) {
				continue
			}
			last = got.Status
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

// statusWrites counts, per reconcile, the status writes that landed, by
// object: what a reconcile of any kind may do at most once per object.
type statusWrites struct {
	mu sync.Mutex
	// byReconcile maps a reconcile's ID to the writes it made, by object.
	byReconcile map[types.UID]map[string]int
	// kinds counts the objects whose status was written, by type.
	kinds map[string]int
}

func (w *statusWrites) count(ctx context.Context, sub string, obj client.Object) {
	id := controller.ReconcileIDFromContext(ctx)
	if sub != "status" || id == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	kind := fmt.Sprintf("%T", obj)
	if w.byReconcile[id] == nil {
		w.byReconcile[id] = map[string]int{}
	}
	w.byReconcile[id][kind+" "+obj.GetNamespace()+"/"+obj.GetName()]++
	w.kinds[kind]++
}

func (w *statusWrites) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if err == nil {
				w.count(ctx, sub, obj)
			}
			return err
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if err == nil {
				w.count(ctx, sub, obj)
			}
			return err
		},
	}
}

// TestOneStatusWritePerReconcileEveryKind runs the five reconcilers with a
// client that counts the status writes of each reconcile, over a Tenant with
// an APIKey, a Provider, an upload billed to it and an MCPServer: no
// reconcile writes one object's status twice, whichever kind it reconciles
// (billing's admissions, which the Ingestion and Provider reconciles make,
// are their Tenant's one write), and every kind's status is written.
func TestOneStatusWritePerReconcileEveryKind(t *testing.T) {
	st := newStore(t)
	jobNS := newNamespace(t, "posture-system")
	w := &statusWrites{byReconcile: map[types.UID]map[string]int{}, kinds: map[string]int{}}
	startManager(t, jobNS, func(mgr ctrl.Manager) error {
		ctx := context.Background()
		c, reader := mgr.GetClient(), mgr.GetAPIReader()
		if err := (&controllers.TenantReconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder("posture-tenant"),
			RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.APIKeyReconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder("posture-apikey"),
			RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.ProviderReconciler{Client: c, APIReader: reader, RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.MCPServerReconciler{Client: c, Defaults: mcpDefaults, Recorder: mgr.GetEventRecorder("posture-mcpserver"),
			RecheckInterval: 200 * time.Millisecond}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&controllers.IngestionReconciler{
			Client: c, Store: st, Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
			Executor: &controllers.JobExecutor{Client: c, Config: controllers.WorkerJobConfig{
				Namespace: jobNS, Image: "posture:test", StoreDriver: "postgres", StoreSecret: "posture-store",
			}},
			Billing: &controllers.Billing{Client: c, APIReader: reader},
		}).SetupWithManager(mgr)
	}, func(o *ctrl.Options) {
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, w.funcs()), nil
		}
	})

	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	key := newAPIKey(t, ns, "key", nil)
	waitAPIKey(t, key, keyReady(metav1.ConditionTrue, ""))
	p := &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "aws-000000000001", Namespace: ns},
		Spec: posturev1.ProviderSpec{Type: "aws", UID: "000000000001", Origin: posturev1.ProviderConnected}}
	create(t, p)
	waitObject(t, client.ObjectKeyFromObject(p), 30*time.Second, "Ready", func(p *posturev1.Provider) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, posturev1.ConditionReady)
	})
	ing := upload(t, st, tn.Name, ns, testenv.Fixture("aws_3_records.ocsf.json"))
	waitFor(t, ing, 30*time.Second, "processing, its accounts billed", func(i *posturev1.Ingestion) bool {
		return i.Status.Phase == posturev1.IngestionProcessing && len(i.Status.Providers) > 0
	})
	m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns},
		Spec: posturev1.MCPServerSpec{Transport: "http", Port: 8080}}
	create(t, m)
	waitObject(t, client.ObjectKeyFromObject(m), 30*time.Second, "observed", func(m *posturev1.MCPServer) bool {
		return m.Status.ObservedGeneration == m.Generation && meta.FindStatusCondition(m.Status.Conditions, posturev1.ConditionReady) != nil
	})
	// The rechecks and polls keep reconciling every kind meanwhile: the
	// Tenant has taken in the upload's Providers once it bills them all.
	waitTenant(t, tn.Name, "billing the connected and the imported providers", func(t *posturev1.Tenant) bool { return t.Status.Providers >= 2 })

	w.mu.Lock()
	defer w.mu.Unlock()
	for id, writes := range w.byReconcile {
		for obj, n := range writes {
			if n > 1 {
				t.Errorf("reconcile %s wrote the status of %s %d times, want once", id, obj, n)
			}
		}
	}
	for _, kind := range []string{"*v1alpha1.Tenant", "*v1alpha1.APIKey", "*v1alpha1.Provider", "*v1alpha1.Ingestion", "*v1alpha1.MCPServer"} {
		if w.kinds[kind] == 0 {
			t.Errorf("no status write of a %s was counted (counted: %v)", kind, w.kinds)
		}
	}
}
