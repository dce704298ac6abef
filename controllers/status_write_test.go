package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/testenv"
)

// TestOneStatusWritePerReconcile follows an Ingestion from its creation: the
// reconcile that accepts and starts it writes its status once, already
// processing (pending and the start are one transition), and a running
// ingestion whose progress does not move is not written again, however
// many polls read it afterwards.
func TestOneStatusWritePerReconcile(t *testing.T) {
	st := newStore(t)
	jobNS := newNamespace(t, "posture-system")
	ns := newNamespace(t, "tenant")
	w := newStatusWrites()
	// The Job executor's Job never runs here, so the ingestion stays
	// processing, polled every 100 ms.
	startManager(t, jobNS, func(mgr ctrl.Manager) error {
		return (&controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st, Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
			Executor: &controllers.JobExecutor{Client: mgr.GetClient(), Config: controllers.WorkerJobConfig{
				Namespace: jobNS, Image: "posture:test", StoreDriver: "postgres", StoreSecret: "posture-store",
			}},
		}).SetupWithManager(mgr)
	}, w.client)
	ing := upload(t, st, "acme", ns, testenv.Fixture("aws_3_records.ocsf.json"))
	key := "*v1alpha1.Ingestion " + ns + "/" + ing.Name
	first := waitPhase(t, ing, posturev1.IngestionProcessing)
	// Five polls that come after the write, each of which read the
	// ingestion, are the facts that nothing was written since.
	after := w.reconcilesOf(key)
	testenv.Eventually(t, 20*time.Second, "five polls after the first write", func() (bool, string) {
		n := w.reconcilesOf(key)
		return n >= after+5, fmt.Sprintf("%d reconciles of the ingestion, %d before", n, after)
	})
	if n := w.writesOf(key); n != 1 {
		t.Fatalf("status written %d times, want once", n)
	}
	s := first.Status
	if s.Summary.Total != ing.Spec.RecordCount || !meta.IsStatusConditionTrue(s.Conditions, posturev1.ConditionReconciling) ||
		meta.IsStatusConditionPresentAndEqual(s.Conditions, posturev1.ConditionReady, metav1.ConditionTrue) {
		t.Errorf("the one write = %+v, want processing with the total, Reconciling=True, not Ready", s)
	}
}

// statusWrites counts, per reconcile, the status writes that landed, by
// object: what a reconcile of any kind may do at most once per object. It
// also counts the reconciles that read each object, the facts a test waits
// on before it says that nothing more was written.
type statusWrites struct {
	mu sync.Mutex
	// byReconcile maps a reconcile's ID to the writes it made, by object.
	byReconcile map[types.UID]map[string]int
	// kinds counts the objects whose status was written, by type.
	kinds map[string]int
	// readers maps an object to the reconciles that read it.
	readers map[string]map[types.UID]bool
}

func newStatusWrites() *statusWrites {
	return &statusWrites{byReconcile: map[types.UID]map[string]int{}, kinds: map[string]int{}, readers: map[string]map[types.UID]bool{}}
}

func objectKey(obj client.Object) string {
	return fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())
}

func (w *statusWrites) count(ctx context.Context, sub string, obj client.Object) {
	id := controller.ReconcileIDFromContext(ctx)
	if sub != "status" || id == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byReconcile[id] == nil {
		w.byReconcile[id] = map[string]int{}
	}
	w.byReconcile[id][objectKey(obj)]++
	w.kinds[fmt.Sprintf("%T", obj)]++
}

func (w *statusWrites) read(ctx context.Context, obj client.Object) {
	id := controller.ReconcileIDFromContext(ctx)
	if id == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := objectKey(obj)
	if w.readers[k] == nil {
		w.readers[k] = map[types.UID]bool{}
	}
	w.readers[k][id] = true
}

// reconcilesOf counts the reconciles that read the object.
func (w *statusWrites) reconcilesOf(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.readers[key])
}

// writesOf counts the status writes of the object.
func (w *statusWrites) writesOf(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, writes := range w.byReconcile {
		n += writes[key]
	}
	return n
}

func (w *statusWrites) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if err == nil {
				w.read(ctx, obj)
			}
			return err
		},
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

// client is a manager option: the manager's client counts what its
// reconciles read and write.
func (w *statusWrites) client(o *ctrl.Options) {
	o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, opts)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, w.funcs()), nil
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
	w := newStatusWrites()
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
	}, w.client)

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
