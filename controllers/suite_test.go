package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/internal/uploads"
)

var (
	restConfig *rest.Config
	k8s        client.Client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	testenv.Main(m, func(cfg *rest.Config) (err error) {
		restConfig = cfg
		k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		return err
	})
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		return -1
	}
	return 2 // errors only: keep test output readable
}

// startManager runs a manager with the given setup until the test ends or the
// returned stop is called. opts may adjust the manager's options (its logger).
func startManager(t *testing.T, jobNamespace string, setup func(ctrl.Manager) error, opts ...func(*ctrl.Options)) (stop func()) {
	t.Helper()
	controllerOptions := controllers.ControllerOptions()
	controllerOptions.SkipNameValidation = ptr.To(true)
	o := ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerOptions,
		// The manager's own client options: Secrets, Deployments and Services
		// are read uncached, as the manager's namespaced rights require.
		Client: controllers.ClientOptions(),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Namespaces: map[string]cache.Config{jobNamespace: {}}},
		}},
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := ctrl.NewManager(restConfig, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return testenv.NewNamespace(t, k8s, prefix)
}

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "posture.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// upload stores a report the way the API does (its records counted and its
// accounts recorded in the one pass) and creates its Ingestion.
func upload(t *testing.T, st store.Store, tenant, namespace, path string) *posturev1.Ingestion {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blob, n, err := uploads.StoreReport(context.Background(), st, tenant, f, 1<<30)
	if err != nil {
		t.Fatalf("store %s: %v", path, err)
	}
	return createUpload(t, blob, n, tenant, namespace, path)
}

// uploadUnrecorded stores a report as intake did before it recorded the
// report's accounts, and creates its Ingestion: what an upgrade finds queued.
func uploadUnrecorded(t *testing.T, st store.Store, tenant, namespace, path string) *posturev1.Ingestion {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ocsf.Count(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("count %s: %v", path, err)
	}
	blob, err := st.PutBlob(context.Background(), tenant, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return createUpload(t, blob, n, tenant, namespace, path)
}

func createUpload(t *testing.T, blob store.Blob, n int, tenant, namespace, path string) *posturev1.Ingestion {
	t.Helper()
	ing := &posturev1.Ingestion{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%08x-0000-4000-8000-%012x", time.Now().UnixNano()&0xffffffff, time.Now().UnixNano()&0xffffffffffff),
			Namespace: namespace,
			Labels:    map[string]string{posturev1.LabelTenant: tenant},
		},
		Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{Upload: &posturev1.UploadSource{
				BlobID: blob.ID, Filename: filepath.Base(path), Size: blob.Size, SHA256: blob.SHA256,
			}},
			RecordCount: int64(n),
		},
	}
	if err := k8s.Create(context.Background(), ing); err != nil {
		t.Fatal(err)
	}
	return ing
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitObject polls the object at key until cond holds, failing the test with
// what it waited for and the object's last state after timeout.
func waitObject[T any, P interface {
	*T
	client.Object
}](t *testing.T, key client.ObjectKey, timeout time.Duration, what string, cond func(P) bool) P {
	t.Helper()
	got := P(new(T))
	testenv.Eventually(t, timeout, fmt.Sprintf("%T %s: %s", got, key, what), func() (bool, string) {
		err := k8s.Get(context.Background(), key, got)
		return err == nil && cond(got), fmt.Sprintf("%+v (err %v)", got, err)
	})
	return got
}

// reconcileSeen reconciles obj by hand once the manager's cache shows it
// as cond wants: a reconcile that comes after the change the test made, so
// that a check that nothing followed from the change relies on what that
// reconcile did, not on a wait that hopes the controller got to it. It
// returns once the reconcile is done.
func reconcileSeen(t *testing.T, rec *controllers.IngestionReconciler, obj *posturev1.Ingestion, cond func(*posturev1.Ingestion) bool) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	testenv.Eventually(t, 10*time.Second, "the manager's cache to see "+key.String()+" changed", func() (bool, string) {
		var seen posturev1.Ingestion
		err := rec.Client.Get(context.Background(), key, &seen)
		return err == nil && cond(&seen), fmt.Sprintf("%+v (err %v)", seen.ObjectMeta, err)
	})
	if _, err := rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile %s: %v", key, err)
	}
}

// waitFor polls the Ingestion until cond holds.
func waitFor(t *testing.T, ing *posturev1.Ingestion, timeout time.Duration, what string, cond func(*posturev1.Ingestion) bool) *posturev1.Ingestion {
	t.Helper()
	return waitObject(t, client.ObjectKeyFromObject(ing), timeout, what, cond)
}

func waitPhase(t *testing.T, ing *posturev1.Ingestion, phase posturev1.IngestionPhase) *posturev1.Ingestion {
	t.Helper()
	return waitFor(t, ing, 60*time.Second, "phase "+string(phase), func(i *posturev1.Ingestion) bool { return i.Status.Phase == phase })
}

// eventReasons lists the reasons of the events about an object, oldest
// first, once there are at least want of them.
func eventReasons(t *testing.T, ing *posturev1.Ingestion, want int) []string {
	t.Helper()
	var reasons []string
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d events about %s", want, ing.Name), func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ing.Namespace)); err != nil {
			return false, err.Error()
		}
		var evs []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Name == ing.Name {
				evs = append(evs, e)
			}
		}
		slices.SortStableFunc(evs, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
		reasons = reasons[:0]
		for _, e := range evs {
			reasons = append(reasons, e.Reason)
		}
		return len(reasons) >= want, fmt.Sprint(reasons)
	})
	return reasons
}
