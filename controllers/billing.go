package controllers

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// ConditionProvidersResolved tells a reader of an Ingestion how its accounts
// were resolved to Providers before the parse. It only describes: the
// decision a retry repeats is status.providers and status.deniedProviders.
const ConditionProvidersResolved = "ProvidersResolved"

// Reasons and job-level error codes of billing.
const (
	ReasonProvidersResolved = "Resolved"
	ReasonProviderLimit     = "ProviderLimitExceeded"
	CodeTenantNotFound      = "tenant_not_found"
	CodeSubscription        = "subscription_required"
	// LabelOrigin mirrors spec.origin as a label, to select imported Providers.
	LabelOrigin = "posture.dev/origin"
)

// Account is one billable cloud account: a provider type and an account id,
// as the validator reports them (type lower-cased, both trimmed).
type Account struct{ Type, UID string }

// Key is the "type/uid" form ingest.Job.AllowedAccounts and
// Ingestion status.providers use.
func (a Account) Key() string { return a.Type + "/" + a.UID }

// Resolution is the outcome of resolving an ingestion's accounts.
type Resolution struct {
	// Allowed accounts have a Provider: reused or created now.
	Allowed []Account
	Reused  []string // Provider names
	Created []string // Provider names
	// Denied accounts found the plan full; their records are invalid.
	Denied []Account
	// Count is the tenant's number of Providers afterwards; Limit its plan's (0 = unlimited).
	Count int
	Limit int32
}

// Billing is the single authority that creates imported Providers. For each
// account it reuses the Provider that exists (no new billing) or creates one
// while the plan limit allows. It serializes per tenant and counts with an
// uncached reader, so concurrent ingestions of one tenant can never exceed the
// limit: the manager runs controllers on the elected leader only, so one
// process does all the creating.
type Billing struct {
	// Client creates Providers.
	Client client.Client
	// APIReader lists Providers straight from the API server: a cache that
	// has not yet seen a Provider created a moment ago would undercount.
	APIReader client.Reader

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// +kubebuilder:rbac:groups=posture.dev,resources=providers,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=posture.dev,resources=tenants,verbs=get;list;watch

func (b *Billing) lock(ns string) func() {
	b.mu.Lock()
	if b.locks == nil {
		b.locks = map[string]*sync.Mutex{}
	}
	l := b.locks[ns]
	if l == nil {
		l = &sync.Mutex{}
		b.locks[ns] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Resolve gives each account, in order, a Provider of tenant t or denies it.
// ingestion names who created a Provider (an annotation); it may be empty.
func (b *Billing) Resolve(ctx context.Context, t *posturev1.Tenant, accounts []Account, ingestion string) (Resolution, error) {
	ns := t.NamespaceName()
	res := Resolution{Limit: t.Spec.Subscription.ProviderLimit}
	unlock := b.lock(ns)
	defer unlock()

	var list posturev1.ProviderList
	if err := b.APIReader.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return res, fmt.Errorf("list the Providers of tenant %s: %w", t.Name, err)
	}
	existing := map[Account]string{}
	for _, p := range list.Items {
		if !p.DeletionTimestamp.IsZero() {
			continue // being deleted: no longer counts, cannot be reused
		}
		existing[Account{providerType(p.Spec.Type), p.Spec.UID}] = p.Name
		res.Count++
	}
	for _, a := range accounts {
		id := Account{providerType(a.Type), a.UID}
		if name, ok := existing[id]; ok {
			res.Allowed = append(res.Allowed, a)
			res.Reused = append(res.Reused, name)
			continue
		}
		if res.Limit > 0 && res.Count >= int(res.Limit) {
			res.Denied = append(res.Denied, a)
			continue
		}
		name, created, err := b.create(ctx, t, ns, a, ingestion)
		if err != nil {
			return res, err
		}
		existing[id] = name
		res.Allowed = append(res.Allowed, a)
		if created {
			res.Count++
			res.Created = append(res.Created, name)
		} else {
			// Someone else (a person, GitOps) created it since the list: it
			// counts, and this ingestion reuses it.
			res.Count++
			res.Reused = append(res.Reused, name)
		}
	}
	return res, nil
}

// create makes the imported Provider of an account. created is false when a
// Provider of the same account appeared meanwhile under the derived name.
func (b *Billing) create(ctx context.Context, t *posturev1.Tenant, ns string, a Account, ingestion string) (name string, created bool, err error) {
	for _, name := range []string{ProviderName(a.Type, a.UID), hashedProviderName(a.Type, a.UID)} {
		p := &posturev1.Provider{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: ns,
				Labels: map[string]string{
					posturev1.LabelTenant:    labelValue(t.Name),
					posturev1.LabelManagedBy: posturev1.ManagedByValue,
					LabelOrigin:              string(posturev1.ProviderImported),
				},
			},
			Spec: posturev1.ProviderSpec{Type: providerType(a.Type), UID: a.UID, Origin: posturev1.ProviderImported},
		}
		if ingestion != "" {
			p.Annotations = map[string]string{"posture.dev/created-by-ingestion": ingestion}
		}
		err := b.Client.Create(ctx, p)
		if err == nil {
			return name, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", false, fmt.Errorf("create Provider %s/%s for account %s: %w", ns, name, a.Key(), err)
		}
		var got posturev1.Provider
		if err := b.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &got); err != nil {
			return "", false, fmt.Errorf("read Provider %s/%s: %w", ns, name, err)
		}
		if providerType(got.Spec.Type) == providerType(a.Type) && got.Spec.UID == a.UID {
			return name, false, nil
		}
		// The name is taken by another account: try the hashed name.
	}
	return "", false, fmt.Errorf("no free Provider name for account %s in namespace %s", a.Key(), ns)
}

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	notDNSChars  = regexp.MustCompile(`[^a-z0-9]+`)
	notTypeChars = regexp.MustCompile(`[^a-z0-9]`)
)

// providerType fits a scanner's provider name to Provider spec.type ([a-z0-9]+).
func providerType(t string) string {
	v := notTypeChars.ReplaceAllString(strings.ToLower(t), "")
	if v == "" {
		return "unknown"
	}
	return v
}

// ProviderName is the Provider name of an account: "<type>-<uid>" when that is
// a DNS label already (aws-123456789012), else a sanitized form with a hash of
// the account so that different accounts never share a name.
func ProviderName(typ, uid string) string {
	if name := providerType(typ) + "-" + uid; len(name) <= 63 && dnsLabel.MatchString(name) {
		return name
	}
	return hashedProviderName(typ, uid)
}

func hashedProviderName(typ, uid string) string {
	sum := sha256.Sum256([]byte(typ + "/" + uid))
	base := strings.Trim(notDNSChars.ReplaceAllString(strings.ToLower(providerType(typ)+"-"+uid), "-"), "-")
	if len(base) > 54 {
		base = strings.TrimRight(base[:54], "-")
	}
	return base + "-" + hex.EncodeToString(sum[:])[:8]
}

// DiscoverAccounts streams a stored report and returns, in order of first
// appearance, the distinct accounts of its valid records: exactly the accounts
// the worker will ask to bill. A report that cannot be read yields the
// accounts found so far; the worker reports the problem itself.
func DiscoverAccounts(ctx context.Context, st store.Store, tenant, blobID string) ([]Account, error) {
	rc, err := st.OpenBlob(ctx, tenant, blobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open report %s to find its accounts: %w", blobID, err)
	}
	defer rc.Close()
	reader := ocsf.NewReader(bufio.NewReaderSize(rc, 256<<10))
	validator := ocsf.NewValidator()
	seen := map[Account]bool{}
	var accounts []Account
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return accounts, nil
		}
		var fe *ocsf.FileError
		if errors.As(err, &fe) {
			return accounts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read report %s to find its accounts: %w", blobID, err)
		}
		f, problems := validator.Check(rec)
		if len(problems) > 0 {
			continue
		}
		a := Account{f.ProviderType, f.ProviderUID}
		if !seen[a] {
			seen[a] = true
			accounts = append(accounts, a)
		}
	}
}

// billingFailure ends an ingestion before it starts.
type billingFailure struct {
	code, message string
}

// resolveProviders is the ingestion's billing step, run before the executor
// starts: it finds the tenant, refuses an inactive subscription, resolves the
// report's accounts to Providers and records the result in the status (the
// caller writes it). It returns the accounts the worker may bill, nil when
// every account fits.
func (r *IngestionReconciler) resolveProviders(ctx context.Context, ing *posturev1.Ingestion, job ingest.Job) (map[string]bool, *billingFailure, error) {
	tenant, err := auth.TenantForNamespace(ctx, r.Client, ing.Namespace)
	var ae *auth.Error
	switch {
	case errors.As(err, &ae):
		return nil, &billingFailure{CodeTenantNotFound, ae.Reason}, nil
	case err != nil:
		return nil, nil, err
	case tenant == nil:
		return nil, &billingFailure{CodeTenantNotFound, fmt.Sprintf("no Tenant uses namespace %s, so the report cannot be billed", ing.Namespace)}, nil
	case !tenant.Spec.Subscription.Active:
		return nil, &billingFailure{CodeSubscription, fmt.Sprintf("tenant %s has no active subscription; ingestion is a paid feature", tenant.Name)}, nil
	}
	accounts, err := DiscoverAccounts(ctx, r.Store, job.Tenant, job.BlobID)
	if err != nil {
		return nil, nil, err
	}
	res, err := r.Billing.Resolve(ctx, tenant, accounts, ing.Name)
	if err != nil {
		return nil, nil, err
	}
	ing.Status.Providers = make([]string, 0, len(res.Allowed))
	for _, a := range res.Allowed {
		ing.Status.Providers = append(ing.Status.Providers, a.Key())
	}
	slices.Sort(ing.Status.Providers)
	ing.Status.Providers = slices.Compact(ing.Status.Providers)
	usage := fmt.Sprintf("tenant %s now has %d providers", tenant.Name, res.Count)
	if res.Limit > 0 {
		usage += fmt.Sprintf(" of %d", res.Limit)
	}
	summary := fmt.Sprintf("accounts in the report: %d; providers reused: %d, created: %d; %s", len(accounts), len(res.Reused), len(res.Created), usage)
	if len(res.Denied) == 0 {
		meta.SetStatusCondition(&ing.Status.Conditions, metav1.Condition{Type: ConditionProvidersResolved, Status: metav1.ConditionTrue,
			Reason: ReasonProvidersResolved, Message: summary, ObservedGeneration: ing.Generation})
		emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonProvidersResolved, "Bill", "%s", summary)
		return nil, nil, nil
	}
	denied := make([]string, 0, len(res.Denied))
	for _, a := range res.Denied {
		denied = append(denied, a.Key())
	}
	ing.Status.DeniedProviders = slices.Compact(slices.Sorted(slices.Values(denied)))
	msg := fmt.Sprintf("%s; over the plan limit of %d providers, so their records are invalid (%s): %s",
		summary, res.Limit, ingest.CodeProviderLimit, strings.Join(firstN(denied, 20), ", "))
	meta.SetStatusCondition(&ing.Status.Conditions, metav1.Condition{Type: ConditionProvidersResolved, Status: metav1.ConditionFalse,
		Reason: ReasonProviderLimit, Message: msg, ObservedGeneration: ing.Generation})
	emit(r.Recorder, ing, corev1.EventTypeWarning, ReasonProviderLimit, "Bill", "%s", msg)
	allowed := make(map[string]bool, len(res.Allowed))
	for _, a := range res.Allowed {
		allowed[a.Key()] = true
	}
	return allowed, nil, nil
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

// FormatAllowedAccounts encodes an allowed-account set for the worker's
// --allowed-accounts flag: a JSON array, sorted, because account ids may hold
// any character (commas included).
func FormatAllowedAccounts(allowed map[string]bool) string {
	keys := make([]string, 0, len(allowed))
	for k, ok := range allowed {
		if ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b, _ := json.Marshal(keys)
	return string(b)
}

// ParseAllowedAccounts decodes --allowed-accounts; "" means no restriction (nil).
func ParseAllowedAccounts(s string) (map[string]bool, error) {
	if s == "" {
		return nil, nil
	}
	var keys []string
	if err := json.Unmarshal([]byte(s), &keys); err != nil {
		return nil, fmt.Errorf(`--allowed-accounts must be a JSON array of "type/uid" strings: %w`, err)
	}
	allowed := make(map[string]bool, len(keys))
	for _, k := range keys {
		if t, u, ok := strings.Cut(k, "/"); !ok || t == "" || u == "" {
			return nil, fmt.Errorf(`--allowed-accounts: %q is not "type/uid"`, k)
		}
		allowed[k] = true
	}
	return allowed, nil
}
