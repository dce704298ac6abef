package webhook_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

func (b *bareEnv) createProvider(t testing.TB, name string, spec posturev1.ProviderSpec) *posturev1.Provider {
	t.Helper()
	p := &posturev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace}, Spec: spec}
	if err := b.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProviders reads the Provider objects of the tenant's namespace.
func TestProviders(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	b.createProvider(t, "aws-123456789012", posturev1.ProviderSpec{Type: "aws", UID: "123456789012", Alias: "prod", Origin: posturev1.ProviderImported})
	b.createProvider(t, "azure-sub-1", posturev1.ProviderSpec{Type: "azure", UID: "sub-1", Alias: "billing"})
	gcp := b.createProvider(t, "gcp-project-x", posturev1.ProviderSpec{Type: "gcp", UID: "project-x", Origin: posturev1.ProviderConnected})
	// One second later, so that inserted_at orders it apart.
	for !time.Now().After(gcp.CreationTimestamp.Add(time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	k8s := b.createProvider(t, "kubernetes-cluster-a", posturev1.ProviderSpec{Type: "kubernetes", UID: "cluster-a", Origin: posturev1.ProviderImported})
	other := startBare(t, bareOpts{})
	other.createProvider(t, "aws-999999999999", posturev1.ProviderSpec{Type: "aws", UID: "999999999999"})

	// The first three may or may not share a creation second: the expected
	// orders by time are derived from the times the API reports.
	d := a.list("/api/v1/providers", "")
	byTime := func(d listDoc, desc bool) bool {
		for i := 1; i < len(d.Data); i++ {
			c := compareAttr(d.Data[i-1].Attributes["inserted_at"], d.Data[i].Attributes["inserted_at"])
			if desc {
				c = -c
			}
			if c > 0 || c == 0 && d.Data[i-1].ID > d.Data[i].ID {
				return false
			}
		}
		return len(d.Data) == 4
	}
	if !byTime(d, true) || d.Data[0].ID != "kubernetes-cluster-a" {
		t.Fatalf("default order = %v", d.ids())
	}
	if asc := a.list("/api/v1/providers", "sort=inserted_at"); !byTime(asc, false) || asc.Data[3].ID != "kubernetes-cluster-a" {
		t.Fatalf("sort=inserted_at: %v", asc.ids())
	}
	first := d.Data[0]
	if first.Type != "providers" || first.Links["self"] != b.URL+"/api/v1/providers/kubernetes-cluster-a" ||
		first.Attributes["type"] != "kubernetes" || first.Attributes["uid"] != "cluster-a" || first.Attributes["alias"] != "" ||
		first.Attributes["origin"] != "imported" || first.Attributes["inserted_at"] != k8s.CreationTimestamp.UTC().Format(time.RFC3339) {
		t.Fatalf("provider = %+v", first)
	}

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"filter[type]=aws", []string{"aws-123456789012"}},
		{"filter[type]=AWS", []string{"aws-123456789012"}},
		{"filter[type__in]=gcp,azure&sort=type", []string{"azure-sub-1", "gcp-project-x"}},
		{"filter[origin]=connected&sort=uid", []string{"gcp-project-x", "azure-sub-1"}},
		{"filter[origin]=imported&sort=uid", []string{"aws-123456789012", "kubernetes-cluster-a"}},
		{"filter[uid]=sub-1", []string{"azure-sub-1"}},
		{"filter[search]=PROD", []string{"aws-123456789012"}},
		{"filter[search]=cluster", []string{"kubernetes-cluster-a"}},
		{"filter[search]=999999999999", nil},
		{"sort=type", []string{"aws-123456789012", "azure-sub-1", "gcp-project-x", "kubernetes-cluster-a"}},
		{"sort=-type", []string{"kubernetes-cluster-a", "gcp-project-x", "azure-sub-1", "aws-123456789012"}},
		{"sort=uid", []string{"aws-123456789012", "kubernetes-cluster-a", "gcp-project-x", "azure-sub-1"}},
		{"sort=-uid", []string{"azure-sub-1", "gcp-project-x", "kubernetes-cluster-a", "aws-123456789012"}},
		{"sort=alias", []string{"gcp-project-x", "kubernetes-cluster-a", "azure-sub-1", "aws-123456789012"}},
		{"sort=-alias", []string{"aws-123456789012", "azure-sub-1", "gcp-project-x", "kubernetes-cluster-a"}},
		{"sort=-type,-inserted_at", []string{"kubernetes-cluster-a", "gcp-project-x", "azure-sub-1", "aws-123456789012"}},
		{"page[size]=3&page[number]=2&sort=type", []string{"kubernetes-cluster-a"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			if got := a.list("/api/v1/providers", tc.query).ids(); !slices.Equal(got, tc.want) && !(len(got) == 0 && tc.want == nil) {
				t.Fatalf("ids = %v, want %v", got, tc.want)
			}
		})
	}
	p := a.list("/api/v1/providers", "page[size]=3")
	if p.Meta.Pagination.Pages != 2 || p.Meta.Pagination.Count != 4 || p.Links.Next == nil {
		t.Fatalf("pagination = %+v", *p.Meta.Pagination)
	}
	trimmed := a.list("/api/v1/providers", "fields[providers]=uid,origin")
	if !slices.Equal(keys(trimmed.Data[0].Attributes), []string{"origin", "uid"}) {
		t.Fatalf("trimmed = %v", trimmed.Data[0].Attributes)
	}

	one := a.one("/api/v1/providers/azure-sub-1", "")
	if one.Data.Attributes["alias"] != "billing" || one.Data.Attributes["origin"] != "connected" {
		t.Fatalf("provider = %+v", one.Data)
	}
	if got := a.one("/api/v1/providers/azure-sub-1", "fields[providers]=type"); !slices.Equal(keys(got.Data.Attributes), []string{"type"}) {
		t.Fatalf("trimmed = %v", got.Data.Attributes)
	}
	for _, id := range []string{"aws-999999999999", "nope", "a..b", "UPPER", "a%20b", "-x"} {
		wantError(t, a.get("/api/v1/providers/"+id, ""), 404, "not_found", "parameter:id")
	}
	for _, tc := range []struct{ path, query, param string }{
		{"/api/v1/providers", "filter[origin]=manual", "filter[origin]"},
		{"/api/v1/providers", "filter[type]=", "filter[type]"},
		{"/api/v1/providers", "filter[type__in]=aws,", "filter[type__in]"},
		{"/api/v1/providers", "filter[alias]=x", "filter[alias]"},
		{"/api/v1/providers", "sort=name", "sort"},
		{"/api/v1/providers", "fields[providers]=name", "fields[providers]"},
		{"/api/v1/providers/azure-sub-1", "sort=type", "sort"},
	} {
		wantError(t, a.get(tc.path, tc.query), 400, "invalid", "parameter:"+tc.param)
	}
	wantError(t, a.get("/api/v1/providers", "page[number]=2"), 404, "not_found", "parameter:page[number]")
}
