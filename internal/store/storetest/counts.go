package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

// checkBoundedGroups checks groups counted under a count limit that the
// matches pass: each group within its true count (truth, keyed by the
// group's values joined by "|"), and the first limit+1 findings in all.
func checkBoundedGroups(t *testing.T, what string, got []store.FindingGroup, truth map[string]int, limit int) {
	t.Helper()
	sum := 0
	for _, g := range got {
		sum += g.Count
		if n := truth[strings.Join(g.Values, "|")]; g.Count > n {
			t.Errorf("%s: group %v counts %d, more than its %d findings", what, g.Values, g.Count, n)
		}
	}
	if sum != limit+1 {
		t.Errorf("%s: the groups count %d findings, want the first %d", what, sum, limit+1)
	}
}

func testFindingCounts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := fixture(t, s)
	value := func(f store.Finding, dim string) string {
		switch dim {
		case "severity":
			return f.Severity
		case "status_code":
			return f.StatusCode
		case "provider_type":
			return f.ProviderType
		case "provider_uid":
			return f.ProviderUID
		case "check_id":
			return f.CheckID
		case "region":
			return f.Region
		}
		t.Fatalf("no dimension %q", dim)
		return ""
	}
	for _, tc := range []struct {
		by []string
		q  store.FindingQuery
	}{
		{by: []string{"severity"}},
		{by: []string{"status_code"}},
		{by: []string{"provider_type"}},
		{by: []string{"region"}},
		{by: []string{"check_id", "status_code"}},
		{by: []string{"severity", "status_code", "provider_type", "provider_uid", "check_id", "region"}},
		{by: []string{"severity"}, q: store.FindingQuery{StatusCode: []string{"fail"}}},
		{by: []string{"provider_uid", "status_code"}, q: store.FindingQuery{Region: "eu-west-1", ScanID: "scan-1"}},
		{by: []string{"check_id"}, q: store.FindingQuery{Search: "bucket", Severity: []string{"LOW", "high"}}},
		{by: []string{"region"}, q: store.FindingQuery{CheckID: "none-such"}},
		// A search's counts stop at CountLimit+1 matches; under the limit
		// they are exact, past it every group is a lower bound.
		{by: []string{"check_id", "status_code"}, q: store.FindingQuery{Search: "bucket", CountLimit: 2}},
		{by: []string{"check_id"}, q: store.FindingQuery{Search: "bucket", CountLimit: 1000}},
	} {
		counts := map[string]int{}
		for _, f := range reference(fs, nil, tc.q) {
			var vals []string
			for _, d := range tc.by {
				vals = append(vals, value(f, d))
			}
			counts[strings.Join(vals, "|")]++
		}
		var want []store.FindingGroup
		for k, n := range counts {
			want = append(want, store.FindingGroup{Values: strings.Split(k, "|"), Count: n})
		}
		slices.SortFunc(want, func(a, b store.FindingGroup) int { return slices.Compare(a.Values, b.Values) })
		if want == nil {
			want = []store.FindingGroup{}
		}
		got, err := s.FindingCounts(ctx, tenantA, tc.q, tc.by)
		must(t, err, fmt.Sprintf("FindingCounts(%v, %+v)", tc.by, tc.q))
		if limit := tc.q.CountLimit; limit > 0 && len(reference(fs, nil, tc.q)) > limit {
			checkBoundedGroups(t, fmt.Sprintf("FindingCounts(%v, %+v)", tc.by, tc.q), got, counts, limit)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("FindingCounts(%v, %+v):\n got %v\nwant %v", tc.by, tc.q, got, want)
		}
	}
	got, err := s.FindingCounts(ctx, tenantB, store.FindingQuery{}, []string{"severity"})
	must(t, err, "FindingCounts B")
	total := 0
	for _, g := range got {
		total += g.Count
	}
	if total != 3 {
		t.Fatalf("tenant B counts %v", got)
	}
	got, err = s.FindingCounts(ctx, "tenant-none", store.FindingQuery{}, []string{"severity"})
	must(t, err, "FindingCounts unknown tenant")
	if len(got) != 0 {
		t.Fatalf("unknown tenant counts %v", got)
	}
	for _, by := range [][]string{nil, {""}, {"title"}, {"severity; --"}, {"raw"}, {"severity", "severity"}} {
		_, err := s.FindingCounts(ctx, tenantA, store.FindingQuery{}, by)
		wantErr(t, err, store.ErrInvalidArgument, fmt.Sprintf("FindingCounts(%q)", by))
	}
}
