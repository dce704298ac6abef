package webhook_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// sampleKey is the API key config/samples/gitops puts in its key Secret.
const sampleKey = "pk_sample01.REPLACE_ME_with_a_key_of_your_own_see_docs_gitops_md"

// writeKubeconfig writes the test API server's address and credentials as a
// kubeconfig for kubectl.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	return testenv.Kubeconfig(t, apitest.RESTConfig(), "envtest")
}

func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestGitOpsSamples applies config/samples/gitops as a GitOps tool would
// (kubectl apply -k, twice) to a manager running the tenant, key, provider
// and ingestion controllers with the in-process executor, and reads the
// ingestion's findings through the REST API with the adopted key.
func TestGitOpsSamples(t *testing.T) {
	authn := &auth.CRAuthenticator{BcryptCost: bcrypt.MinCost}
	env := apitest.Start(t, apitest.Options{
		Auth:          authn,
		Tokens:        authn,
		BillProviders: true,
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			ctx := context.Background()
			if err := (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			authn.Reader, authn.Secrets = mgr.GetClient(), mgr.GetAPIReader()
			if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			if err := (&controllers.ProviderReconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			return (&controllers.APIKeyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
				RecheckInterval: time.Second}).SetupWithManager(ctx, mgr)
		},
	})
	k8s := env.Client
	ctx := context.Background()
	t.Cleanup(func() {
		for _, o := range []client.Object{
			&posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "gitops-demo"}},
			&posturev1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "ci-scanner", Namespace: "tenant-gitops-demo"}},
			&posturev1.MuteRule{ObjectMeta: metav1.ObjectMeta{Name: "public-website-buckets", Namespace: "tenant-gitops-demo"}},
		} {
			_ = k8s.Delete(context.Background(), o)
		}
	})
	kc := writeKubeconfig(t)
	dir := filepath.Join(testenv.Root(), "config", "samples", "gitops")
	kubectl(t, kc, "apply", "-k", dir)

	// kubectl wait reads the Ready conditions the way GitOps health checks do.
	for _, obj := range []string{"tenant/gitops-demo", "-n tenant-gitops-demo apikey/ci-scanner", "-n tenant-gitops-demo ingestion/nightly-2026-11-24",
		"-n tenant-gitops-demo muterule/public-website-buckets"} {
		kubectl(t, kc, append([]string{"wait", "--for=condition=Ready", "--timeout=60s"}, strings.Fields(obj)...)...)
	}
	// What kubectl wait saw, read as it read it: the manager's cache may
	// not have caught up yet.
	live := env.APIReader
	var ing posturev1.Ingestion
	if err := live.Get(ctx, client.ObjectKey{Namespace: "tenant-gitops-demo", Name: "nightly-2026-11-24"}, &ing); err != nil {
		t.Fatal(err)
	}
	if ing.Status.Phase != posturev1.IngestionCompleted || ing.Status.Summary != (posturev1.IngestionSummary{Total: 3, Processed: 3}) {
		t.Fatalf("ingestion = %s %+v, want completed 3/3/0", ing.Status.Phase, ing.Status.Summary)
	}
	var key posturev1.APIKey
	if err := live.Get(ctx, client.ObjectKey{Namespace: "tenant-gitops-demo", Name: "ci-scanner"}, &key); err != nil {
		t.Fatal(err)
	}
	if key.Status.KeyOrigin != controllers.KeyOriginAdopted || key.Status.Hash != auth.HashKey(sampleKey) {
		t.Errorf("APIKey status = %+v, want the sample Secret's key adopted", key.Status)
	}
	var providers posturev1.ProviderList
	if err := live.List(ctx, &providers, client.InNamespace("tenant-gitops-demo")); err != nil {
		t.Fatal(err)
	}
	if len(providers.Items) != 1 || providers.Items[0].Spec.UID != "123456789012" {
		t.Errorf("Providers = %+v, want the report's one AWS account billed", providers.Items)
	}

	scanner := &api{t: t, url: env.URL, auth: "Api-Key " + sampleKey}
	findings := scanner.list("/api/v1/findings", "")
	if n := len(findings.Data); n != 3 {
		t.Fatalf("GET /api/v1/findings with the adopted key: %d findings, want the report's 3", n)
	}
	// The mute rule kept in Git mutes the test bucket's finding: left out
	// of the current state, listed with filter[muted]=true and its reason.
	// The rule reads Ready once its pass is done; the ingestion may have
	// marked the finding before.
	testenv.Eventually(t, 30*time.Second, "the mute rule to mute one finding", func() (bool, string) {
		d := scanner.list("/api/v1/findings/latest", "filter[muted]=true")
		return len(d.Data) == 1, string(scanner.get("/api/v1/findings/latest", "filter[muted]=true").body)
	})
	if n := len(scanner.list("/api/v1/findings/latest", "").Data); n != 2 {
		t.Errorf("the current state with the sample's mute rule: %d findings, want 2", n)
	}

	// Re-applying the same manifests imports nothing again.
	out := kubectl(t, kc, "apply", "-k", dir)
	// Unchanged is the API server's word that no object changed, so no
	// controller was woken to do anything about it.
	if !strings.Contains(out, "ingestion.posture.dev/nightly-2026-11-24 unchanged") {
		t.Errorf("second apply: %s", out)
	}
	var again posturev1.Ingestion
	if err := live.Get(ctx, client.ObjectKeyFromObject(&ing), &again); err != nil {
		t.Fatal(err)
	}
	if again.Status.Attempt != 1 || again.Status.Report.FetchedAt.Compare(ing.Status.Report.FetchedAt.Time) != 0 {
		t.Errorf("after re-apply: attempt %d, fetched at %v; want the first run's", again.Status.Attempt, again.Status.Report.FetchedAt)
	}
	if n := len(scanner.list("/api/v1/findings", "").Data); n != 3 {
		t.Errorf("findings after re-apply = %d, want 3", n)
	}
	for _, c := range again.Status.Conditions {
		if c.Type == posturev1.ConditionStalled && c.Status == metav1.ConditionTrue {
			t.Errorf("the ingestion is Stalled: %+v", c)
		}
	}
	if r := meta.FindStatusCondition(key.Status.Conditions, posturev1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("APIKey Ready = %+v", r)
	}

	// Health as Flux, Argo CD and kubectl wait compute it: every object the
	// samples declare, and the Provider billing made, reads Current.
	for _, gvk := range []struct{ kind, ns string }{
		{"Tenant", ""}, {"APIKey", "tenant-gitops-demo"}, {"Ingestion", "tenant-gitops-demo"}, {"Provider", "tenant-gitops-demo"},
		{"MuteRule", "tenant-gitops-demo"},
	} {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(posturev1.GroupVersion.WithKind(gvk.kind + "List"))
		if err := live.List(ctx, &list, client.InNamespace(gvk.ns)); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			if o.GetKind() == "Tenant" && o.GetName() != "gitops-demo" {
				continue
			}
			res, err := kstatus.Compute(&o)
			if err != nil || res.Status != kstatus.CurrentStatus {
				t.Errorf("kstatus of %s %s/%s = %v (%v), want Current", gvk.kind, o.GetNamespace(), o.GetName(), res, err)
			}
		}
	}
}
