// Package tenancy is the one home of who owns what: which Tenant owns a
// namespace (and so every object and stored row in it), and the label form
// of a tenant's name that marks the namespaces it owns. Every door (the
// REST API, the aggregated API and the UI behind the REST API) and every
// controller asks it, so that the cross-tenant rule is written once.
package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Error is a namespace whose owner cannot be told as things stand: only a
// person can fix it. Reason says how, and is safe to show any caller.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

// IndexNamespace indexes Tenants by the namespace they use.
const IndexNamespace = "posture.dev/tenant-namespace"

// SetupIndexes registers the index ForNamespace reads with a manager's
// field indexer. Each component that needs it calls it; repeated
// registrations are ignored.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &posturev1.Tenant{}, IndexNamespace, func(o client.Object) []string {
		return []string{o.(*posturev1.Tenant).NamespaceName()}
	})
	if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
		return fmt.Errorf("index Tenants by %s: %w", IndexNamespace, err)
	}
	return nil
}

// ForNamespace returns the Tenant that owns namespace ns, or nil when no
// Tenant names it. A namespace belongs to the Tenant whose label
// (posturev1.LabelTenant) it carries: the first Tenant to claim it labels
// it, and a later Tenant naming the same namespace never takes it over, so
// its existence cannot lock the owner out. Only a namespace not yet
// labelled falls back to the Tenants naming it, and several of those fail
// closed.
func ForNamespace(ctx context.Context, r client.Reader, ns string) (*posturev1.Tenant, error) {
	var list posturev1.TenantList
	if err := r.List(ctx, &list, client.MatchingFields{IndexNamespace: ns}); err != nil {
		return nil, fmt.Errorf("look up the Tenant of namespace %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	var nsObj corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read namespace %s to find its Tenant: %w", ns, err)
	}
	if owner := nsObj.Labels[posturev1.LabelTenant]; err == nil && owner != "" {
		for i := range list.Items {
			if LabelValue(list.Items[i].Name) == owner {
				return &list.Items[i], nil
			}
		}
		return nil, &Error{fmt.Sprintf("namespace %s belongs to tenant %s (label %s), which does not exist; only that Tenant may use it", ns, owner, posturev1.LabelTenant)}
	}
	if len(list.Items) == 1 {
		return &list.Items[0], nil
	}
	names := make([]string, 0, len(list.Items))
	for _, t := range list.Items {
		names = append(names, t.Name)
	}
	return nil, &Error{fmt.Sprintf("namespace %s is claimed by several Tenants (%s) and carries no %s label yet; an administrator must resolve it", ns, strings.Join(names, ", "), posturev1.LabelTenant)}
}

// Owns reports whether t is the Tenant its namespace belongs to. A Tenant
// that names another tenant's namespace must not sign its users in or
// resolve their tokens: its spec would otherwise point at the owner's
// Secrets and data.
func Owns(ctx context.Context, r client.Reader, t *posturev1.Tenant) (bool, error) {
	owner, err := ForNamespace(ctx, r, t.NamespaceName())
	var te *Error
	switch {
	case errors.As(err, &te):
		return false, nil
	case err != nil:
		return false, err
	}
	return owner != nil && owner.Name == t.Name, nil
}

var notLabelChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// LabelValue fits a name into a label value (63 characters, alphanumeric at
// both ends); names too long keep a hash so they stay distinct. The tenant
// label of a namespace is LabelValue of the Tenant's name.
func LabelValue(s string) string {
	v := notLabelChars.ReplaceAllString(s, "-")
	if len(v) > 63 || v != s {
		sum := sha256.Sum256([]byte(s))
		v = strings.Trim(v[:min(len(v), 54)], "-._") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return strings.Trim(v, "-._")
}

// Of names the tenant an Ingestion's report, run, error rows and findings
// are stored under: its tenant label, which the API sets on an upload, else
// its namespace's name.
func Of(ing *posturev1.Ingestion) string {
	if t := ing.Labels[posturev1.LabelTenant]; t != "" {
		return t
	}
	return ing.Namespace
}

// ForeignClaim says why the tenant an Ingestion would be stored under (Of:
// its label, else its namespace's name) cannot be trusted: it is not the
// tenant that owns the Ingestion's namespace, or no Tenant owns that
// namespace and the one claimed exists. Empty when it is the owner, or when
// neither exists (nothing of anyone's is touched; billing then refuses the
// report). Anyone who may create Ingestions in a namespace can write the
// label, so one naming another tenant must be refused before the store is
// touched: it would write into, or delete from, that tenant's data.
func ForeignClaim(ctx context.Context, r client.Reader, ing *posturev1.Ingestion) (string, error) {
	label := ing.Labels[posturev1.LabelTenant]
	claimed := Of(ing)
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: ing.Namespace}, &ns); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	owner := ns.Labels[posturev1.LabelTenant]
	if owner == "" {
		t, err := ForNamespace(ctx, r, ing.Namespace)
		// A namespace no Tenant owns (or that several claim) may not store
		// under a Tenant that exists: that Tenant's namespace is another.
		var te *Error
		switch {
		case errors.As(err, &te):
			return fmt.Sprintf("%s; nothing was read or stored", te.Reason), nil
		case err != nil:
			return "", err
		case t == nil:
			var claimedTenant posturev1.Tenant
			if err := r.Get(ctx, types.NamespacedName{Name: claimed}, &claimedTenant); err != nil {
				return "", client.IgnoreNotFound(err)
			}
			return fmt.Sprintf("tenant %s does not use namespace %s, which no Tenant uses; an Ingestion is stored only under the tenant of its namespace, "+
				"so nothing was read or stored: create it in the tenant's namespace", claimed, ing.Namespace), nil
		}
		owner = LabelValue(t.Name)
	}
	if LabelValue(claimed) == owner {
		return "", nil
	}
	if label == "" {
		return fmt.Sprintf("the Ingestion has no %s label, so it would be stored under tenant %s, which does not own namespace %s (%s); "+
			"nothing was read or stored: label it %s=%s, or submit the report through the API", posturev1.LabelTenant, claimed, ing.Namespace, owner, posturev1.LabelTenant, owner), nil
	}
	return fmt.Sprintf("label %s=%s names another tenant than the one that owns namespace %s (%s); "+
		"an Ingestion is stored only under the tenant of its namespace, so nothing was read or stored: "+
		"remove the label and create the Ingestion again", posturev1.LabelTenant, label, ing.Namespace, owner), nil
}

// Subscribed is whether t's plan lets it ingest reports and read their
// findings: the subscription gate's one rule.
func Subscribed(t *posturev1.Tenant) bool { return t.Spec.Subscription.Active }

// SubscriptionRequired is the one answer to a tenant without an active
// subscription: 402 at the REST and the aggregated API, and the ingestion-level
// error subscription_required of an Ingestion that reaches the controller.
type SubscriptionRequired struct{ Tenant string }

func (e *SubscriptionRequired) Error() string {
	return "tenant " + e.Tenant + " has no active subscription; ingesting reports and reading their findings need one"
}

// Gate is the subscription gate: nil for a subscribed tenant, else
// *SubscriptionRequired.
func Gate(tenant string, subscribed bool) error {
	if subscribed {
		return nil
	}
	return &SubscriptionRequired{Tenant: tenant}
}

// NoTenant is a namespace that no Tenant uses.
type NoTenant struct{ Namespace string }

func (e *NoTenant) Error() string { return "no Tenant uses namespace " + e.Namespace }

// Refusal is the kind of reason Resolve gives for a namespace in which no
// Tenant may act.
type Refusal int

const (
	// NotRefused: the error is no refusal (the lookup itself failed).
	NotRefused Refusal = iota
	// OwnerUnclear: only a person can tell who owns the namespace (*Error).
	OwnerUnclear
	// NoOwner: no Tenant uses the namespace (*NoTenant).
	NoOwner
	// NotSubscribed: its owner has no active subscription
	// (*SubscriptionRequired).
	NotSubscribed
)

// Refused sorts an error of Resolve into its kind and the message that
// explains it, for a door to answer in its own terms.
func Refused(err error) (Refusal, string) {
	var (
		te  *Error
		nt  *NoTenant
		sub *SubscriptionRequired
	)
	switch {
	case errors.As(err, &te):
		return OwnerUnclear, te.Reason
	case errors.As(err, &nt):
		return NoOwner, nt.Error()
	case errors.As(err, &sub):
		return NotSubscribed, sub.Error()
	}
	return NotRefused, ""
}

// Resolve is the Tenant that may act in namespace ns: the one that owns it,
// with an active subscription. It fails with *Error when only a person can
// tell who owns ns, *NoTenant when no Tenant uses it, and
// *SubscriptionRequired when its owner is not subscribed; each door answers
// those in its own terms, in that order.
func Resolve(ctx context.Context, r client.Reader, ns string) (*posturev1.Tenant, error) {
	t, err := ForNamespace(ctx, r, ns)
	switch {
	case err != nil:
		return nil, err
	case t == nil:
		return nil, &NoTenant{Namespace: ns}
	}
	if err := Gate(t.Name, Subscribed(t)); err != nil {
		return nil, err
	}
	return t, nil
}

// Usage is a tenant's providers against its plan.
type Usage struct {
	// Billed is how many providers the plan bills: the one counting rule,
	// read by the REST API, the Tenant's status, metrics and billing.
	Billed int
	// Limit is the plan's; 0 means unlimited.
	Limit int32
	// Remaining is how many more the plan admits; meaningless when Limit is 0.
	Remaining int
}

// Unlimited says whether the plan bills any number of providers.
func (u Usage) Unlimited() bool { return u.Limit <= 0 }

// UsageOf is t's provider usage, from the admissions in its status.
func UsageOf(t *posturev1.Tenant) Usage {
	u := Usage{Billed: len(t.Status.AdmittedProviders), Limit: t.Spec.Subscription.ProviderLimit}
	if !u.Unlimited() {
		u.Remaining = max(0, int(u.Limit)-u.Billed)
	}
	return u
}
