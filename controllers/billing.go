package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
)

// ConditionProvidersResolved tells a reader of an Ingestion how its accounts
// were resolved to Providers before the parse. It only describes: the
// decision a retry repeats is status.providers and status.deniedProviders.
const ConditionProvidersResolved = "ProvidersResolved"

// Reasons and ingestion-level error codes of billing.
const (
	ReasonProvidersResolved = "Resolved"
	ReasonProviderLimit     = "ProviderLimitExceeded"
	CodeTenantNotFound      = "tenant_not_found"
	CodeSubscription        = "subscription_required"
	// LabelOrigin mirrors spec.origin as a label, to select imported Providers.
	LabelOrigin = "posture.dev/origin"
)

// Resolution is the outcome of resolving an ingestion's accounts.
type Resolution struct {
	// Allowed accounts have an admitted Provider: reused or created now.
	Allowed []billing.Account
	Reused  []string // Provider names
	Created []string // Provider names
	// Denied accounts found the plan full; their records are invalid.
	Denied []billing.Account
	// Count is the tenant's number of billed Providers afterwards; Limit its
	// plan's (0 = unlimited).
	Count int
	Limit int32
}

// Billing admits Providers to a tenant's plan, whoever wrote them: the
// ingestions' imported Providers and the Providers people or GitOps apply.
// The admitted set lives in the Tenant's status (status.admittedProviders);
// every change to it is a transaction of the Tenant's one status writer
// (TenantStatus), which the API server serialises across goroutines,
// controllers and manager replicas alike: of two writers admitting at once,
// one gets a conflict and decides again on the other's result.
type Billing struct {
	// Client writes Tenant status (through TenantStatus) and creates
	// Providers.
	Client client.Client
	// APIReader reads Tenants and Providers straight from the API server: a
	// decision on a cached Tenant would only meet a conflict and retry.
	APIReader client.Reader
	Now       func() time.Time
}

// +kubebuilder:rbac:groups=posture.dev,resources=providers,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=posture.dev,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=posture.dev,resources=tenants/status,verbs=get;update;patch

func (b *Billing) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// ledger opens tenant t's admitted providers, read from its status, with the
// admissions of Providers that are gone or never came pruned; ps are the
// tenant's Providers, read afresh.
func (b *Billing) ledger(ctx context.Context, t *posturev1.Tenant) (*billing.Ledger, []posturev1.Provider, error) {
	var list posturev1.ProviderList
	if err := b.APIReader.List(ctx, &list, client.InNamespace(t.NamespaceName())); err != nil {
		return nil, nil, fmt.Errorf("list the Providers of tenant %s: %w", t.Name, err)
	}
	l := billing.NewLedger(t)
	l.Prune(billing.Observe(list.Items), b.now())
	return l, list.Items, nil
}

// admit is an admission: a transaction of the Tenant's status writer that
// lets decide change the ledger and records the result in the status.
// decide must be repeatable: it runs again after a conflict.
func (b *Billing) admit(ctx context.Context, name string, decide func(t *posturev1.Tenant, l *billing.Ledger, ps []posturev1.Provider) error) (*posturev1.Tenant, *billing.Ledger, error) {
	var l *billing.Ledger
	t, err := TenantStatus{Client: b.Client, Reader: b.APIReader}.Commit(ctx, name, func(t *posturev1.Tenant) error {
		var ps []posturev1.Provider
		var err error
		if l, ps, err = b.ledger(ctx, t); err != nil {
			return err
		}
		if err := decide(t, l, ps); err != nil {
			return err
		}
		if l.Changed() {
			l.Apply(t)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return t, l, nil
}

// Resolve gives each account, in order, an admitted Provider of tenant t or
// denies it. An account whose Provider exists is admitted if it was already
// or the plan has room; one without is admitted first and its imported
// Provider created right after. ingestion names who created a Provider (an
// annotation); it may be empty.
func (b *Billing) Resolve(ctx context.Context, t *posturev1.Tenant, accounts []billing.Account, ingestion string) (Resolution, error) {
	ns := t.NamespaceName()
	var res Resolution
	var create []billing.Account
	var createNames []string
	_, l, err := b.admit(ctx, t.Name, func(t *posturev1.Tenant, l *billing.Ledger, ps []posturev1.Provider) error {
		res = Resolution{Limit: l.Limit()}
		create, createNames = nil, nil
		byAccount := map[billing.Account]*posturev1.Provider{}
		taken := map[string]billing.Account{}
		for i := range ps {
			p := &ps[i]
			acct := billing.Account{Type: ocsf.ProviderType(p.Spec.Type), UID: p.Spec.UID}
			taken[p.Name] = acct
			if p.DeletionTimestamp.IsZero() {
				byAccount[acct] = p
			}
		}
		now := b.now()
		for _, a := range accounts {
			id := a.Normal()
			var name string
			var uid types.UID
			p, exists := byAccount[id]
			if exists {
				name, uid = p.Name, p.UID
			} else {
				name = billing.ProviderName(a.Type, a.UID)
				if other, ok := taken[name]; ok && other != id {
					// The plain name belongs to another account.
					name = billing.HashedProviderName(a.Type, a.UID)
				}
			}
			if !l.Admit(name, a, uid, now) {
				res.Denied = append(res.Denied, a)
				continue
			}
			res.Allowed = append(res.Allowed, a)
			if exists {
				res.Reused = append(res.Reused, name)
				continue
			}
			byAccount[id] = &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name}}
			taken[name] = id
			create, createNames = append(create, a), append(createNames, name)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("admit the accounts of tenant %s: %w", t.Name, err)
	}
	res.Count = l.Count()
	for i, a := range create {
		created, err := b.create(ctx, t, ns, createNames[i], a, ingestion)
		if err != nil {
			return res, err
		}
		if created {
			res.Created = append(res.Created, createNames[i])
		} else {
			res.Reused = append(res.Reused, createNames[i])
		}
	}
	return res, nil
}

// AdmitProvider admits an existing Provider, written by anyone, if the plan
// has room. It reports whether p is admitted, and the tenant's billed count
// and limit afterwards.
func (b *Billing) AdmitProvider(ctx context.Context, tenant string, p *posturev1.Provider) (admitted bool, count int, limit int32, err error) {
	_, l, err := b.admit(ctx, tenant, func(_ *posturev1.Tenant, l *billing.Ledger, _ []posturev1.Provider) error {
		admitted = l.Admit(p.Name, billing.Account{Type: p.Spec.Type, UID: p.Spec.UID}, p.UID, b.now())
		return nil
	})
	if err != nil {
		return false, 0, 0, fmt.Errorf("admit Provider %s/%s to tenant %s: %w", p.Namespace, p.Name, tenant, err)
	}
	return admitted, l.Count(), l.Limit(), nil
}

// prune is the Tenant reconciler's part of billing, run inside its own
// status transaction: admissions of Providers that are gone or being
// deleted give their places back to the plan.
func (b *Billing) prune(ctx context.Context, t *posturev1.Tenant) error {
	l, _, err := b.ledger(ctx, t)
	if err != nil {
		return fmt.Errorf("prune the admitted providers of tenant %s: %w", t.Name, err)
	}
	if l.Changed() {
		l.Apply(t)
	}
	return nil
}

// create makes the imported Provider name of an admitted account. created
// is false when a Provider of the same account appeared meanwhile under that
// name; one of another account there is an error (its admission lapses).
func (b *Billing) create(ctx context.Context, t *posturev1.Tenant, ns, name string, a billing.Account, ingestion string) (created bool, err error) {
	p := &posturev1.Provider{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			Labels: map[string]string{
				posturev1.LabelTenant:    tenancy.LabelValue(t.Name),
				posturev1.LabelManagedBy: posturev1.ManagedByValue,
				LabelOrigin:              string(posturev1.ProviderImported),
			},
		},
		Spec: posturev1.ProviderSpec{Type: ocsf.ProviderType(a.Type), UID: a.UID, Origin: posturev1.ProviderImported},
	}
	if ingestion != "" {
		p.Annotations = map[string]string{"posture.dev/created-by-ingestion": ingestion}
	}
	err = b.Client.Create(ctx, p)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create Provider %s/%s for account %s: %w", ns, name, a.Key(), err)
	}
	var got posturev1.Provider
	if err := b.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &got); err != nil {
		return false, fmt.Errorf("read Provider %s/%s: %w", ns, name, err)
	}
	if ocsf.ProviderType(got.Spec.Type) == ocsf.ProviderType(a.Type) && got.Spec.UID == a.UID {
		return false, nil
	}
	return false, fmt.Errorf("Provider %s/%s, admitted for account %s, was taken by account %s/%s meanwhile", ns, name, a.Key(), got.Spec.Type, got.Spec.UID)
}

// discoverAccounts returns the accounts of an ingestion's report, as intake
// recorded them with the blob, so the report is read once more only by the
// worker. A blob stored before intake recorded them (an upgrade with
// ingestions still queued) is read once to find them, which are then
// recorded; a report already gone has none.
func discoverAccounts(ctx context.Context, st store.Blobs, tenant, blobID string) ([]billing.Account, error) {
	stored, recorded, err := st.BlobAccounts(ctx, tenant, blobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the accounts of report %s: %w", blobID, err)
	}
	if recorded {
		return billing.FromStore(stored), nil
	}
	rc, err := st.OpenBlob(ctx, tenant, blobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open report %s to find its accounts: %w", blobID, err)
	}
	defer rc.Close()
	accounts, err := billing.DiscoverAccounts(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", blobID, err)
	}
	// A retried reconcile then finds them recorded instead of reading the
	// report again.
	if err := st.RecordBlobAccounts(ctx, tenant, blobID, billing.ToStore(accounts)); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("record the accounts of report %s: %w", blobID, err)
	}
	return accounts, nil
}

// admitProviders is the step that bills a pending ingestion before its
// first attempt: it finds the tenant, refuses an inactive subscription,
// resolves the report's accounts to Providers and records the result in the
// status, which every attempt then bills by (AllowedAccountsOf).
func (r *IngestionReconciler) admitProviders(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) (next, error) {
	if r.Billing == nil || (ing.Status.Phase != "" && ing.Status.Phase != posturev1.IngestionPending) {
		return goOn, nil
	}
	a := r.attempt(ing, int(ing.Status.Attempt)+1)
	if a.BlobID == "" {
		// Nothing to bill: the attempt fails for want of a report.
		return goOn, nil
	}
	tenant, err := tenancy.Resolve(ctx, r.Client, ing.Namespace)
	switch refusal, why := tenancy.Refused(err); {
	case refusal == tenancy.OwnerUnclear:
		return r.fail(ctx, ing, f, CodeTenantNotFound, why, store.Progress{})
	case refusal == tenancy.NoOwner:
		return r.fail(ctx, ing, f, CodeTenantNotFound, why+", so the report cannot be billed", store.Progress{})
	case refusal == tenancy.NotSubscribed:
		return r.fail(ctx, ing, f, CodeSubscription, why, store.Progress{})
	case err != nil:
		return goOn, err
	}
	accounts, err := discoverAccounts(ctx, r.Store, a.Tenant, a.BlobID)
	if err != nil {
		return goOn, fmt.Errorf("resolve providers: %w", err)
	}
	res, err := r.Billing.Resolve(ctx, tenant, accounts, ing.Name)
	if err != nil {
		return goOn, fmt.Errorf("resolve providers: %w", err)
	}
	ing.Status.Providers = make([]string, 0, len(res.Allowed))
	for _, acct := range res.Allowed {
		ing.Status.Providers = append(ing.Status.Providers, acct.Key())
	}
	slices.Sort(ing.Status.Providers)
	ing.Status.Providers = slices.Compact(ing.Status.Providers)
	summary := fmt.Sprintf("accounts in the report: %d; providers reused: %d, created: %d; %s", len(accounts), len(res.Reused), len(res.Created), providerUsage(tenant.Name, res.Count, res.Limit))
	if len(res.Denied) == 0 {
		f.Billing = &billingOutcome{Message: summary}
		return goOn, nil
	}
	denied := make([]string, 0, len(res.Denied))
	for _, acct := range res.Denied {
		denied = append(denied, acct.Key())
	}
	ing.Status.DeniedProviders = slices.Compact(slices.Sorted(slices.Values(denied)))
	f.Billing = &billingOutcome{Denied: true, Message: fmt.Sprintf("%s; over the plan limit of %s, so their records are invalid (%s): %s",
		summary, counted(res.Limit, "provider"), ingest.CodeProviderLimit, strings.Join(firstN(denied, 20), ", "))}
	return goOn, nil
}

// providerUsage words a tenant's billed providers against its plan's limit
// (0 = unlimited) for the ProvidersResolved condition.
func providerUsage(tenant string, count int, limit int32) string {
	if limit > 0 {
		return fmt.Sprintf("tenant %s now has %d of %s", tenant, count, counted(limit, "provider"))
	}
	return fmt.Sprintf("tenant %s now has %s", tenant, counted(count, "provider"))
}

// AllowedAccountsOf rebuilds the billing decision recorded in an Ingestion's
// status, so a retried attempt bills exactly like the first: nil when every
// account fit (or no billing ran), else the accounts that may be billed.
func AllowedAccountsOf(ing *posturev1.Ingestion) map[string]bool {
	if len(ing.Status.DeniedProviders) == 0 {
		return nil
	}
	allowed := make(map[string]bool, len(ing.Status.Providers))
	for _, k := range ing.Status.Providers {
		allowed[k] = true
	}
	return allowed
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}
