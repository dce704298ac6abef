package billing_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/tenancy"
)

func TestLedger(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	admitted := func(name string, uid types.UID, ago time.Duration) posturev1.AdmittedProvider {
		return posturev1.AdmittedProvider{Name: name, Account: "aws/" + name, UID: uid, AdmittedAt: metav1.NewTime(now.Add(-ago))}
	}
	type admit struct {
		name string
		want bool
	}
	for _, tc := range []struct {
		name     string
		limit    int32
		admitted []posturev1.AdmittedProvider
		observed map[string]billing.Observed
		admits   []admit
		want     []string // names admitted afterwards, sorted
		changed  bool
	}{
		{
			name: "room left: admits up to the limit, then refuses", limit: 2,
			admits: []admit{{"a", true}, {"b", true}, {"c", false}, {"a", true}},
			want:   []string{"a", "b"}, changed: true,
		},
		{
			name: "unlimited", limit: 0,
			admits: []admit{{"a", true}, {"b", true}, {"c", true}},
			want:   []string{"a", "b", "c"}, changed: true,
		},
		{
			name: "an admitted Provider is admitted again without a place", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "uid-a", time.Hour)},
			observed: map[string]billing.Observed{"a": {UID: "uid-a"}},
			admits:   []admit{{"a", true}, {"b", false}},
			want:     []string{"a"},
		},
		{
			name: "a Provider being deleted frees its place", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "uid-a", time.Hour)},
			observed: map[string]billing.Observed{"a": {UID: "uid-a", Deleting: true}},
			admits:   []admit{{"b", true}},
			want:     []string{"b"}, changed: true,
		},
		{
			name: "a Provider gone after it was seen frees its place at once", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "uid-a", time.Second)},
			admits:   []admit{{"b", true}},
			want:     []string{"b"}, changed: true,
		},
		{
			name: "a Provider replaced under the same name is a new one", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "uid-old", time.Hour)},
			observed: map[string]billing.Observed{"a": {UID: "uid-new"}, "b": {UID: "uid-b"}},
			admits:   []admit{{"b", true}, {"a", false}},
			want:     []string{"b"}, changed: true,
		},
		{
			name: "a pending creation keeps its place within the grace", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "", billing.AdmissionGrace-time.Second)},
			admits:   []admit{{"b", false}},
			want:     []string{"a"},
		},
		{
			name: "a creation that never happened lapses after the grace", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "", billing.AdmissionGrace+time.Second)},
			admits:   []admit{{"b", true}},
			want:     []string{"b"}, changed: true,
		},
		{
			name: "a created Provider gets its UID recorded", limit: 1,
			admitted: []posturev1.AdmittedProvider{admitted("a", "", time.Second)},
			observed: map[string]billing.Observed{"a": {UID: "uid-a"}},
			want:     []string{"a"}, changed: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := &posturev1.Tenant{
				Spec:   posturev1.TenantSpec{Subscription: posturev1.Subscription{Active: true, ProviderLimit: tc.limit}},
				Status: posturev1.TenantStatus{AdmittedProviders: tc.admitted},
			}
			l := billing.NewLedger(tn)
			l.Prune(tc.observed, now)
			for _, a := range tc.admits {
				if got := l.Admit(a.name, billing.Account{Type: "aws", UID: a.name}, "", now); got != a.want {
					t.Errorf("Admit(%s) = %v, want %v", a.name, got, a.want)
				}
			}
			if l.Changed() != tc.changed {
				t.Errorf("Changed() = %v, want %v", l.Changed(), tc.changed)
			}
			l.Apply(tn)
			var got []string
			for _, a := range tn.Status.AdmittedProviders {
				got = append(got, a.Name)
			}
			if len(got) != len(tc.want) || tenancy.UsageOf(tn).Billed != len(tc.want) {
				t.Fatalf("admitted %v (billed %d), want %v", got, tenancy.UsageOf(tn).Billed, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("admitted %v, want %v", got, tc.want)
				}
			}
			if tc.limit > 0 && len(got) > int(tc.limit) {
				t.Fatalf("%d admitted over the limit %d", len(got), tc.limit)
			}
		})
	}
}
