package billing

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// AdmissionGrace is how long an admission may wait for its Provider to
// appear: the writer admits first and creates the Provider right after, so
// an admission older than this without its Provider is one whose creation
// failed, and it is dropped.
const AdmissionGrace = 2 * time.Minute

// Ledger is a tenant's admitted providers, changed in memory. The caller
// writes Admitted() back to the Tenant's status with the resourceVersion it
// read, so that of two writers admitting at once one fails with a conflict
// and decides again on the other's result.
type Ledger struct {
	limit    int32
	admitted []posturev1.AdmittedProvider
	changed  bool
}

// NewLedger starts from t's status and spec.
func NewLedger(t *posturev1.Tenant) *Ledger {
	return &Ledger{limit: t.Spec.Subscription.ProviderLimit, admitted: slices.Clone(t.Status.AdmittedProviders)}
}

// Observed is what the API server holds under a Provider name.
type Observed struct {
	UID types.UID
	// Deleting: the Provider has a deletion timestamp; it no longer counts.
	Deleting bool
}

// Observe maps a tenant namespace's Providers by name.
func Observe(providers []posturev1.Provider) map[string]Observed {
	m := make(map[string]Observed, len(providers))
	for i := range providers {
		m[providers[i].Name] = Observed{UID: providers[i].UID, Deleting: !providers[i].DeletionTimestamp.IsZero()}
	}
	return m
}

// Prune drops the admissions of Providers that were deleted (being deleted,
// gone after they were seen, or replaced by a new object of the same name),
// and of Providers never created within AdmissionGrace of their admission.
// It records the UID of a Provider seen for the first time.
func (l *Ledger) Prune(observed map[string]Observed, now time.Time) {
	kept := l.admitted[:0]
	for _, a := range l.admitted {
		o, exists := observed[a.Name]
		switch {
		case exists && o.Deleting,
			exists && a.UID != "" && a.UID != o.UID,
			!exists && a.UID != "",
			!exists && now.Sub(a.AdmittedAt.Time) > AdmissionGrace:
			l.changed = true
			continue
		case exists && a.UID == "":
			a.UID = o.UID
			l.changed = true
		}
		kept = append(kept, a)
	}
	l.admitted = kept
}

// Has reports whether the Provider named name is admitted.
func (l *Ledger) Has(name string) bool {
	return slices.ContainsFunc(l.admitted, func(a posturev1.AdmittedProvider) bool { return a.Name == name })
}

// Admit admits the Provider name of account a if it is not admitted yet and
// the plan has room; it reports whether the Provider is admitted. uid is the
// Provider's when it exists, empty when it is yet to be created.
func (l *Ledger) Admit(name string, a Account, uid types.UID, now time.Time) bool {
	if l.Has(name) {
		return true
	}
	if l.limit > 0 && len(l.admitted) >= int(l.limit) {
		return false
	}
	l.admitted = append(l.admitted, posturev1.AdmittedProvider{Name: name, Account: a.Normal().Key(), UID: uid, AdmittedAt: metav1.NewTime(now.UTC().Truncate(time.Second))})
	l.changed = true
	return true
}

// Count is the number of admitted providers.
func (l *Ledger) Count() int { return len(l.admitted) }

// Limit is the plan's limit; 0 means unlimited.
func (l *Ledger) Limit() int32 { return l.limit }

// Changed reports whether Prune or Admit changed the list.
func (l *Ledger) Changed() bool { return l.changed }

// Apply writes the list into t's status, sorted by name so that equal sets
// read equal. status.providers is left to the Tenant controller, which
// writes it with the message that reports it.
func (l *Ledger) Apply(t *posturev1.Tenant) {
	out := slices.Clone(l.admitted)
	slices.SortFunc(out, func(a, b posturev1.AdmittedProvider) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	t.Status.AdmittedProviders = out
}
