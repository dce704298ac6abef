package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

func TestAllowedAccountsFlag(t *testing.T) {
	for _, allowed := range []map[string]bool{
		{},
		{"aws/123456789012": true},
		{"aws/1": true, "kubernetes/arn:aws:eks:x:cluster/a,b": true, `gcp/we"ird`: true},
	} {
		enc := billing.FormatAllowedAccounts(allowed)
		got, err := billing.ParseAllowedAccounts(enc)
		if err != nil {
			t.Fatalf("parse %s: %v", enc, err)
		}
		if got == nil || len(got) != len(allowed) {
			t.Fatalf("round trip of %v via %s = %v", allowed, enc, got)
		}
		for k := range allowed {
			if !got[k] {
				t.Errorf("round trip lost %q", k)
			}
		}
	}
	if got, err := billing.ParseAllowedAccounts(""); got != nil || err != nil {
		t.Errorf(`"" must mean no restriction (nil), got %v, %v`, got, err)
	}
	for _, bad := range []string{"aws/1", `["nouid"]`, `["/x"]`, `[1]`} {
		if _, err := billing.ParseAllowedAccounts(bad); err == nil {
			t.Errorf("ParseAllowedAccounts(%s) accepted", bad)
		}
	}

	ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "i", Namespace: "n", UID: "u"}}
	job := ingest.Attempt{Tenant: "t", IngestionID: "i", BlobID: "b", Attempt: 1}
	flagOf := func(j *batchJob) string {
		for _, a := range j.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--allowed-accounts=") {
				return strings.TrimPrefix(a, "--allowed-accounts=")
			}
		}
		return "(none)"
	}
	if f := flagOf(controllers.BuildWorkerJob(controllers.WorkerJobConfig{}, ing, job)); f != "(none)" {
		t.Errorf("without a restriction the Job must not pass --allowed-accounts, got %s", f)
	}
	job.AllowedAccounts = map[string]bool{"aws/2": true, "aws/1": true}
	if f := flagOf(controllers.BuildWorkerJob(controllers.WorkerJobConfig{}, ing, job)); f != `["aws/1","aws/2"]` {
		t.Errorf("--allowed-accounts = %s, want the sorted JSON array", f)
	}
}

// accountsReport writes a report with perAccount valid AWS records for each
// account, built from a real scanner record.
func accountsReport(t *testing.T, perAccount int, accounts ...string) string {
	t.Helper()
	raw, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var records []map[string]any
	if err := json.Unmarshal(raw, &records); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, acct := range accounts {
		for i := range perAccount {
			var rec map[string]any
			b, _ := json.Marshal(records[i%len(records)])
			_ = json.Unmarshal(b, &rec)
			rec["cloud"].(map[string]any)["account"].(map[string]any)["uid"] = acct
			rec["finding_info"].(map[string]any)["uid"] = fmt.Sprintf("finding-%s-%d", acct, i)
			out = append(out, rec)
		}
	}
	b, _ := json.Marshal(out)
	return writeTemp(t, "accounts.ocsf.json", string(b))
}

func providersOf(t *testing.T, ns string) map[string]posturev1.Provider {
	t.Helper()
	var list posturev1.ProviderList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	m := map[string]posturev1.Provider{}
	for _, p := range list.Items {
		m[p.Spec.Type+"/"+p.Spec.UID] = p
	}
	return m
}

func errorCodes(t *testing.T, st store.Store, tenant, id string) map[string]int {
	t.Helper()
	rows, _, err := st.ListIngestionErrors(context.Background(), tenant, id, store.Page{Number: 1, Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, r := range rows {
		codes[r.Code]++
	}
	return codes
}

func TestBillingReusesAndCreates(t *testing.T) {
	st := newStore(t)
	runTenancy(t, st)
	tn := newTenant(t, nil)
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	connected := newProvider(t, ns, "aws", "111111111111", posturev1.ProviderConnected)

	ing := upload(t, st, tn.Name, ns, accountsReport(t, 2, "111111111111", "222222222222"))
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Summary.Invalid != 0 || got.Status.Summary.Processed != 4 {
		t.Errorf("summary = %+v, want 4 processed, 0 invalid", got.Status.Summary)
	}
	if want := []string{"aws/111111111111", "aws/222222222222"}; !slices.Equal(got.Status.Providers, want) {
		t.Errorf("status.providers = %v, want %v", got.Status.Providers, want)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionProvidersResolved)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "providers reused: 1, created: 1") {
		t.Errorf("ProvidersResolved = %+v, want True with 1 reused, 1 created", c)
	}
	ps := providersOf(t, ns)
	if len(ps) != 2 {
		t.Fatalf("providers = %v, want 2", ps)
	}
	if p := ps["aws/111111111111"]; p.Name != connected.Name || p.Spec.Origin != posturev1.ProviderConnected {
		t.Errorf("the connected provider was not reused as it was: %+v", p)
	}
	if p := ps["aws/222222222222"]; p.Name != "aws-222222222222" || p.Spec.Origin != posturev1.ProviderImported || p.Labels[posturev1.LabelTenant] != tn.Name {
		t.Errorf("imported provider = %s %+v labels %v", p.Name, p.Spec, p.Labels)
	}
	waitTenant(t, tn.Name, "2 providers", func(t *posturev1.Tenant) bool { return t.Status.Providers == 2 })

	// The same accounts again: nothing new is billed.
	again := upload(t, st, tn.Name, ns, accountsReport(t, 1, "222222222222", "111111111111"))
	got = waitPhase(t, again, posturev1.IngestionCompleted)
	if c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionProvidersResolved); c == nil || !strings.Contains(c.Message, "providers reused: 2, created: 0") {
		t.Errorf("second ingestion: ProvidersResolved = %+v, want 2 reused", c)
	}
	if n := len(providersOf(t, ns)); n != 2 {
		t.Errorf("providers after a repeat = %d, want 2", n)
	}
}

func TestBillingLimitAndRemoval(t *testing.T) {
	st := newStore(t)
	runTenancy(t, st)
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 2 })
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	newProvider(t, ns, "aws", "111111111111", posturev1.ProviderConnected)

	// One existing, two new accounts, room for one: the last one is refused.
	ing := upload(t, st, tn.Name, ns, accountsReport(t, 3, "111111111111", "222222222222", "333333333333"))
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Summary != (posturev1.IngestionSummary{Total: 9, Processed: 9, Invalid: 3}) {
		t.Errorf("summary = %+v, want 9/9 with 3 invalid", got.Status.Summary)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionProvidersResolved)
	if c == nil || c.Reason != controllers.ReasonProviderLimit || !strings.Contains(c.Message, "aws/333333333333") {
		t.Errorf("ProvidersResolved = %+v, want ProviderLimitExceeded naming aws/333333333333", c)
	}
	if codes := errorCodes(t, st, tn.Name, ing.Name); codes[ingest.CodeProviderLimit] != 3 || len(codes) != 1 {
		t.Errorf("error rows = %v, want 3 × %s", codes, ingest.CodeProviderLimit)
	}
	ps := providersOf(t, ns)
	if len(ps) != 2 || ps["aws/333333333333"].Name != "" {
		t.Errorf("providers = %v, want 111… and 222… only", ps)
	}
	waitTenant(t, tn.Name, "2 of 2", func(t *posturev1.Tenant) bool { return t.Status.Providers == 2 })

	// Removing a provider frees its place.
	p := ps["aws/222222222222"]
	if err := k8s.Delete(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	waitTenant(t, tn.Name, "1 of 2 after the removal", func(t *posturev1.Tenant) bool { return t.Status.Providers == 1 })
	next := upload(t, st, tn.Name, ns, accountsReport(t, 1, "333333333333"))
	got = waitPhase(t, next, posturev1.IngestionCompleted)
	if got.Status.Summary.Invalid != 0 {
		t.Errorf("after the removal the account should fit: %+v", got.Status.Summary)
	}
	if ps := providersOf(t, ns); len(ps) != 2 || ps["aws/333333333333"].Spec.Origin != posturev1.ProviderImported {
		t.Errorf("providers = %v, want 111… and 333…", ps)
	}
}

func TestBillingRefusesWithoutTenantOrSubscription(t *testing.T) {
	st := newStore(t)
	runTenancy(t, st)
	unsub := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription = posturev1.Subscription{} })
	unsubNS := waitTenant(t, unsub.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	for _, tc := range []struct {
		name, tenant, ns, code string
	}{
		{"inactive subscription", unsub.Name, unsubNS, controllers.CodeSubscription},
		{"no Tenant for the namespace", "nobody", newNamespace(t, "tenantless"), controllers.CodeTenantNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := upload(t, st, tc.tenant, tc.ns, accountsReport(t, 1, "444444444444"))
			waitPhase(t, ing, posturev1.IngestionFailed)
			if codes := errorCodes(t, st, tc.tenant, ing.Name); codes[tc.code] != 1 {
				t.Errorf("error rows = %v, want one %s", codes, tc.code)
			}
			if ps := providersOf(t, tc.ns); len(ps) != 0 {
				t.Errorf("providers were created: %v", ps)
			}
		})
	}
}

// TestBillingRaceNeverExceedsLimit resolves overlapping account sets from many
// goroutines at once; the Provider count must end exactly at the limit.
func TestBillingRaceNeverExceedsLimit(t *testing.T) {
	runTenancy(t, nil)
	const limit = 3
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = limit })
	tn = waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	ns := tn.Status.Namespace
	b := &controllers.Billing{Client: k8s, APIReader: k8s}

	const workers = 16
	var wg sync.WaitGroup
	results := make([]controllers.Resolution, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			accounts := []billing.Account{
				{Type: "aws", UID: fmt.Sprintf("%012d", i)},
				{Type: "aws", UID: fmt.Sprintf("%012d", (i+1)%workers)},
			}
			results[i], errs[i] = b.Resolve(context.Background(), tn, accounts, fmt.Sprintf("ing-%d", i))
		}()
	}
	close(start)
	wg.Wait()
	created, allowed := 0, map[string]bool{}
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v", i, errs[i])
		}
		created += len(results[i].Created)
		for _, a := range results[i].Allowed {
			allowed[a.Key()] = true
		}
		if results[i].Count > limit {
			t.Errorf("worker %d saw %d providers, over the limit %d", i, results[i].Count, limit)
		}
	}
	ps := providersOf(t, ns)
	if len(ps) != limit || created != limit || len(allowed) != limit {
		t.Fatalf("providers = %d, created = %d, accounts allowed = %d; all must equal the limit %d", len(ps), created, len(allowed), limit)
	}
	for k := range allowed {
		if _, ok := ps[k]; !ok {
			t.Errorf("account %s was allowed but has no Provider", k)
		}
	}
}

// TestConcurrentIngestionsAtLimit runs several ingestions of new accounts at
// once through the controller: together they may never bill past the limit.
func TestConcurrentIngestionsAtLimit(t *testing.T) {
	st := newStore(t)
	runTenancy(t, st)
	const limit = 3
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = limit })
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	var ings []*posturev1.Ingestion
	for i := range 6 {
		ings = append(ings, upload(t, st, tn.Name, ns, accountsReport(t, 2, fmt.Sprintf("5%011d", i), fmt.Sprintf("6%011d", i))))
	}
	billed := map[string]bool{}
	valid := int64(0)
	for _, ing := range ings {
		got := waitFor(t, ing, 60*time.Second, "a terminal phase", func(i *posturev1.Ingestion) bool { return i.Status.Phase.Terminal() })
		for _, k := range got.Status.Providers {
			billed[k] = true
		}
		valid += got.Status.Summary.Processed - got.Status.Summary.Invalid
	}
	if n := len(providersOf(t, ns)); n != limit {
		t.Errorf("providers = %d, want exactly the limit %d", n, limit)
	}
	if len(billed) != limit || valid != 2*limit {
		t.Errorf("accounts billed across ingestions = %d, valid records = %d; want %d and %d", len(billed), valid, limit, 2*limit)
	}
}

type batchJob = batchv1.Job

// TestBillingWithJobExecutor checks that the billing decision reaches a Job
// pod: through the worker flag, and again for a retried attempt.
func TestBillingWithJobExecutor(t *testing.T) {
	st := newStore(t)
	jobNS := newNamespace(t, "posture-system")
	startManager(t, jobNS, func(mgr ctrl.Manager) error {
		if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(context.Background(), mgr); err != nil {
			return err
		}
		return (&controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st,
			Executor: &controllers.JobExecutor{Client: mgr.GetClient(), Config: controllers.WorkerJobConfig{
				Namespace: jobNS, Image: "posture:test", StoreDriver: "postgres", StoreSecret: "posture-store",
			}},
			Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
			Billing: &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		}).SetupWithManager(mgr)
	})
	tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.Subscription.ProviderLimit = 1 })
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	ing := upload(t, st, tn.Name, ns, accountsReport(t, 2, "777777777777", "888888888888"))
	waitPhase(t, ing, posturev1.IngestionProcessing)
	job := waitJob(t, jobNS, ing)

	// What the pod does: parse its flags, run the worker against the store.
	var allowed map[string]bool
	for _, a := range job.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--allowed-accounts="); ok {
			var err error
			if allowed, err = billing.ParseAllowedAccounts(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(allowed) != 1 || !allowed["aws/777777777777"] {
		t.Fatalf("the Job allows %v, want only aws/777777777777 (limit 1)", allowed)
	}
	w := &ingest.Worker{Store: st, Log: ctrl.Log}
	if err := w.Run(context.Background(), ingest.Attempt{Tenant: tn.Name, IngestionID: ing.Name, BlobID: ing.Spec.Source.Upload.BlobID,
		Attempt: 1, Total: 4, AllowedAccounts: allowed}); err != nil {
		t.Fatal(err)
	}
	finishJob(t, job, true)
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Summary.Invalid != 2 {
		t.Errorf("summary = %+v, want the 2 records of aws/888888888888 invalid", got.Status.Summary)
	}
	if d := got.Status.DeniedProviders; len(d) != 1 || d[0] != "aws/888888888888" {
		t.Errorf("status.deniedProviders = %v, want [aws/888888888888]", d)
	}
	// A retried attempt rebuilds the same restriction from the status.
	if a := controllers.AllowedAccountsOf(got); len(a) != 1 || !a["aws/777777777777"] {
		t.Errorf("AllowedAccountsOf = %v, want the first attempt's decision", a)
	}
}

// A try that fails on a cancelled context (a manager shutting down) is an
// error, never a success without a ledger: client-go's retry takes such a
// try for an interrupted wait and answers with the last conflict, none.
func TestAdmitOnACancelledContext(t *testing.T) {
	b := &controllers.Billing{Client: k8s, APIReader: k8s}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "aws-111111111111", Namespace: "tenant-x"},
		Spec: posturev1.ProviderSpec{Type: "aws", UID: "111111111111"}}
	admitted, _, _, err := b.AdmitProvider(ctx, "x", p)
	if err == nil || !errors.Is(err, context.Canceled) || admitted {
		t.Errorf("AdmitProvider on a cancelled context = admitted %v, %v; want context.Canceled", admitted, err)
	}
	w := controllers.TenantStatus{Client: k8s, Reader: k8s}
	if _, err := w.Commit(ctx, "x", func(*posturev1.Tenant) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a status transaction on a cancelled context: %v; want context.Canceled", err)
	}
}
