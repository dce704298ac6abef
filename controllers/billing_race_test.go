package controllers_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/tenancy"
	"github.com/posture-dev/posture/internal/testenv"
)

// kubeconfig writes the test API server's address and credentials for kubectl.
func kubeconfig(t *testing.T) string {
	t.Helper()
	return testenv.Kubeconfig(t, restConfig, "envtest")
}

// providersManifest is what a person or a GitOps tool applies: Providers
// of the given accounts in namespace ns.
func providersManifest(ns string, uids []string) string {
	var b strings.Builder
	for _, uid := range uids {
		fmt.Fprintf(&b, "---\napiVersion: posture.dev/v1alpha1\nkind: Provider\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  type: aws\n  uid: %q\n",
			billing.ProviderName("aws", uid), ns, uid)
	}
	return b.String()
}

// TestPlanLimitHoldsForEveryWriter races every writer of Providers against
// one plan: ingestions through the controller, a second manager replica
// (its own Tenant and Provider controllers, and its own billing of
// ingestions' accounts), and people applying Providers with kubectl. Every
// version of the Tenant the API server ever held must bill at most the
// limit; in the end exactly the limit is billed, the billed Providers read
// Ready and every other one Stalled with ProviderLimitExceeded.
func TestPlanLimitHoldsForEveryWriter(t *testing.T) {
	const limit = 4
	st := newStore(t)
	runLifecycle(t, st, st, 0, nil) // replica 1: Tenant, Provider and Ingestion controllers
	var replica2 *controllers.Billing
	startManager(t, "default", func(mgr ctrl.Manager) error { // replica 2, not elected either
		ctx := context.Background()
		replica2 = &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
		if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		return (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr)
	})
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = limit })
	tn = waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	ns := tn.Status.Namespace

	// Every version of the Tenant, as the API server serialised them.
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	w, err := wc.Watch(watchCtx, &posturev1.TenantList{}, client.MatchingFields{"metadata.name": tn.Name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: tn.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	var maxBilled, versions int
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			if got, ok := ev.Object.(*posturev1.Tenant); ok && ev.Type == watch.Modified {
				versions++
				maxBilled = max(maxBilled, tenancy.UsageOf(got).Billed)
			}
		}
	}()

	kc := kubeconfig(t)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 64)
	// People and GitOps: three kubectl applies of four Providers each.
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var uids []string
			for j := range 4 {
				uids = append(uids, fmt.Sprintf("2%05d%06d", i, j))
			}
			path := writeTemp(t, fmt.Sprintf("providers-%d.yaml", i), providersManifest(ns, uids))
			<-start
			if out, err := exec.Command("kubectl", "--kubeconfig", kc, "apply", "-f", path).CombinedOutput(); err != nil {
				errs <- fmt.Errorf("kubectl apply -f %s: %v\n%s", path, err, out)
			}
		}()
	}
	// Replica 2 bills the accounts of ingestions it runs.
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := replica2.Resolve(context.Background(), tn, []billing.Account{{Type: "aws", UID: fmt.Sprintf("3%011d", i)}}, fmt.Sprintf("replica2-%d", i))
			if err != nil {
				errs <- fmt.Errorf("replica 2, resolve %d: %w", i, err)
			} else if res.Count > limit {
				errs <- fmt.Errorf("replica 2, resolve %d: %d providers billed, over the limit %d", i, res.Count, limit)
			}
		}()
	}
	// Ingestions through replica 1.
	var ings []*posturev1.Ingestion
	for i := range 4 {
		ings = append(ings, upload(t, st, tn.Name, ns, accountsReport(t, 1, fmt.Sprintf("1%011d", 2*i), fmt.Sprintf("1%011d", 2*i+1))))
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	billedByIngestions := map[string]bool{}
	for _, ing := range ings {
		got := waitFor(t, ing, 60*time.Second, "an end", func(i *posturev1.Ingestion) bool { return i.Status.Phase.Terminal() })
		for _, k := range got.Status.Providers {
			billedByIngestions[k] = true
		}
	}

	// Settled: every Provider has been decided on.
	var final *posturev1.Tenant
	testenv.Eventually(t, 60*time.Second, "every Provider billed or stalled, the limit reached", func() (bool, string) {
		final = &posturev1.Tenant{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tn), final); err != nil {
			return false, err.Error()
		}
		var list posturev1.ProviderList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		ready, stalled := 0, 0
		for _, p := range list.Items {
			r := meta.FindStatusCondition(p.Status.Conditions, posturev1.ConditionReady)
			s := meta.FindStatusCondition(p.Status.Conditions, posturev1.ConditionStalled)
			switch {
			case r != nil && r.Status == metav1.ConditionTrue && s == nil:
				ready++
			case r != nil && r.Reason == controllers.ReasonProviderOverLimit && s != nil && s.Status == metav1.ConditionTrue && s.Reason == controllers.ReasonProviderOverLimit:
				stalled++
			}
		}
		state := fmt.Sprintf("%d Providers: %d billed, %d stalled; tenant bills %d", len(list.Items), ready, stalled, tenancy.UsageOf(final).Billed)
		return ready == limit && ready+stalled == len(list.Items) && tenancy.UsageOf(final).Billed == limit && final.Status.Providers == limit, state
	})
	admitted := map[string]bool{}
	for _, a := range final.Status.AdmittedProviders {
		admitted[a.Account] = true
	}
	for k := range billedByIngestions {
		if !admitted[k] {
			t.Errorf("an ingestion billed account %s, which the tenant does not bill (%v)", k, admitted)
		}
	}
	stopWatch()
	<-watched
	if versions == 0 {
		t.Fatal("the watch saw no version of the Tenant; the check below would prove nothing")
	}
	if maxBilled > limit {
		t.Errorf("a version of the Tenant billed %d providers, over the limit %d", maxBilled, limit)
	}
	t.Logf("%d versions of the Tenant watched; at most %d providers billed", versions, maxBilled)
}

// A Provider a person declares beyond the plan waits, Stalled, and is
// billed as soon as a place frees up: by raising the limit or by deleting
// a billed Provider.
func TestStalledProviderBilledOncePlaceFrees(t *testing.T) {
	startManager(t, "default", func(mgr ctrl.Manager) error {
		ctx := context.Background()
		if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		return (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RecheckInterval: 200 * time.Millisecond}).SetupWithManager(ctx, mgr)
	})
	billed := func(p *posturev1.Provider) bool {
		return readyIs(p.Status.Conditions, metav1.ConditionTrue, controllers.ReasonProviderBilled) &&
			meta.FindStatusCondition(p.Status.Conditions, posturev1.ConditionStalled) == nil
	}
	stalled := func(p *posturev1.Provider) bool {
		s := meta.FindStatusCondition(p.Status.Conditions, posturev1.ConditionStalled)
		return readyIs(p.Status.Conditions, metav1.ConditionFalse, controllers.ReasonProviderOverLimit) &&
			s != nil && s.Status == metav1.ConditionTrue && s.Reason == controllers.ReasonProviderOverLimit
	}
	for _, tc := range []struct {
		name string
		free func(t *testing.T, tn *posturev1.Tenant, first *posturev1.Provider)
	}{
		{"the limit is raised", func(t *testing.T, tn *posturev1.Tenant, _ *posturev1.Provider) {
			patch := client.MergeFrom(tn.DeepCopy())
			tn.Spec.Subscription.ProviderLimit = 2
			if err := k8s.Patch(context.Background(), tn, patch); err != nil {
				t.Fatal(err)
			}
		}},
		{"a billed Provider is deleted", func(t *testing.T, _ *posturev1.Tenant, first *posturev1.Provider) {
			deleteObject(t, first)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 1 })
			ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
			first := newProvider(t, ns, "aws", "111111111111", posturev1.ProviderConnected)
			waitProvider(t, first, billed)
			second := newProvider(t, ns, "aws", "222222222222", posturev1.ProviderConnected)
			waitProvider(t, second, stalled)
			if got := waitTenant(t, tn.Name, "1 billed", func(t *posturev1.Tenant) bool { return t.Status.Providers == 1 }); tenancy.UsageOf(got).Billed != 1 {
				t.Fatalf("the tenant bills %d providers, want 1", tenancy.UsageOf(got).Billed)
			}
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tn), tn); err != nil {
				t.Fatal(err)
			}
			tc.free(t, tn, first)
			waitProvider(t, second, billed)
		})
	}
}
