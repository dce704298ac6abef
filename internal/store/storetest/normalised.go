package storetest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// CheckNormalisedUpgrade reads, after the migration that brings stored
// rows to today's rules, the rows an upgrade test wrote with SQL in the
// form earlier releases stored them. Tenant "t"; each finding titled
// "Old finding <uid>", raw record {}, status FAIL, region eu-west-1:
//
//	uid  scan  severity       severity_id  provider_type  provider_uid
//	u-1  s-1   critical       1            aws            1
//	u-2  s-1   informational  5            aws            1
//	u-3  s-1   severe         4            aws            1
//	u-4  s-1   high           4            aws            1
//	u-5  s-2   medium         3            google cloud   p
//	u-6  s-3   low            2            google-cloud   p
//	u-7  s-4   unknown        3            k8s_cluster    c
//
// Scans s-1 to s-4 carry their findings' accounts, and each is its
// account's latest scan, s-3 completed after s-2; the summaries and the
// scans' bounds are as those releases kept them (a GROUP BY of these
// findings). Afterwards every read gives the severity pair ocsf.Severity
// gives and the provider type ocsf.ProviderType gives, the severity order
// is the captions', the current state (rebuilt by a later migration, per
// account and check) holds every run, the raw records are untouched, and every count
// the summaries answer equals a GROUP BY over the findings (db).
func CheckNormalisedUpgrade(t *testing.T, s store.Store, db SummaryDB) {
	t.Helper()
	ctx := ctxT(t)
	const tenant = "t"
	type row struct {
		severity     string
		severityID   int
		providerType string
	}
	want := map[string]row{
		"u-1": {"critical", 5, "aws"},
		"u-2": {"informational", 1, "aws"},
		"u-3": {"high", 4, "aws"},
		"u-4": {"high", 4, "aws"},
		"u-5": {"medium", 3, "googlecloud"},
		"u-6": {"low", 2, "googlecloud"},
		"u-7": {"unknown", 0, "k8scluster"},
	}
	all, total, err := s.ListFindings(ctx, tenant, store.FindingQuery{Sort: []string{"-severity_id", "uid"}, Page: store.Page{Size: 20}})
	must(t, err, "ListFindings by -severity_id")
	got := map[string]row{}
	var order []string
	for _, f := range all {
		got[f.UID] = row{f.Severity, f.SeverityID, f.ProviderType}
		order = append(order, f.UID)
		if string(f.Raw) != `{}` {
			t.Errorf("finding %s: raw record %q after the upgrade, want the stored {} untouched", f.UID, f.Raw)
		}
	}
	if total != len(want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("findings after the upgrade (total %d):\n got %v\nwant %v", total, got, want)
	}
	if wantOrder := []string{"u-1", "u-3", "u-4", "u-5", "u-6", "u-2", "u-7"}; !slices.Equal(order, wantOrder) {
		t.Errorf("most severe first after the upgrade: %v, want %v", order, wantOrder)
	}

	uids := func(q store.FindingQuery) []string {
		t.Helper()
		q.Sort, q.Page = []string{"uid"}, store.Page{Size: 20}
		found, _, err := s.ListFindings(ctx, tenant, q)
		must(t, err, fmt.Sprintf("ListFindings %+v", q))
		var out []string
		for _, f := range found {
			out = append(out, f.UID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    store.FindingQuery
		want []string
	}{
		{"severity critical", store.FindingQuery{Severity: []string{"critical"}}, []string{"u-1"}},
		{"severity informational", store.FindingQuery{Severity: []string{"informational"}}, []string{"u-2"}},
		{"the vendor's label is gone", store.FindingQuery{Severity: []string{"severe"}}, nil},
		{"provider type googlecloud", store.FindingQuery{ProviderType: []string{"googlecloud"}}, []string{"u-5", "u-6"}},
		{"the old type is gone", store.FindingQuery{ProviderType: []string{"google cloud"}}, nil},
		// s-2 and s-3 became the same account's; each holds the only run
		// of its check, so both stay current.
		{"latest", store.FindingQuery{Latest: true}, []string{"u-1", "u-2", "u-3", "u-4", "u-5", "u-6", "u-7"}},
		{"latest by event time", store.FindingQuery{Latest: true, Sort: []string{"time"}}, []string{"u-1", "u-2", "u-3", "u-4", "u-5", "u-6", "u-7"}},
	} {
		q := c.q
		var got []string
		if len(q.Sort) > 0 {
			// Sorted otherwise, then compared as a set: the order's walk
			// reads the scans' rebuilt bounds.
			q.Page = store.Page{Size: 20}
			found, _, err := s.ListFindings(ctx, tenant, q)
			must(t, err, c.name)
			for _, f := range found {
				got = append(got, f.UID)
			}
			slices.Sort(got)
		} else {
			got = uids(q)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	scans, _, err := s.ListScans(ctx, tenant, store.ScanQuery{Page: store.Page{Size: 20}})
	must(t, err, "ListScans")
	types := map[string]string{}
	for _, sc := range scans {
		types[sc.ID] = sc.ProviderType
	}
	if wantTypes := map[string]string{"s-1": "aws", "s-2": "googlecloud", "s-3": "googlecloud", "s-4": "k8scluster"}; !maps.Equal(types, wantTypes) {
		t.Errorf("scans' provider types after the upgrade: %v, want %v", types, wantTypes)
	}

	counts := func(q store.FindingQuery, by ...string) []store.FindingGroup {
		t.Helper()
		gs, err := s.FindingCounts(ctx, tenant, q, by)
		must(t, err, fmt.Sprintf("FindingCounts %+v by %v", q, by))
		return gs
	}
	g := func(v string, n int) store.FindingGroup { return store.FindingGroup{Values: []string{v}, Count: n} }
	for _, c := range []struct {
		name string
		q    store.FindingQuery
		by   string
		want []store.FindingGroup
	}{
		{"by severity", store.FindingQuery{}, "severity",
			[]store.FindingGroup{g("critical", 1), g("high", 2), g("informational", 1), g("low", 1), g("medium", 1), g("unknown", 1)}},
		{"by provider type", store.FindingQuery{}, "provider_type",
			[]store.FindingGroup{g("aws", 4), g("googlecloud", 2), g("k8scluster", 1)}},
		{"latest by provider type", store.FindingQuery{Latest: true}, "provider_type",
			[]store.FindingGroup{g("aws", 4), g("googlecloud", 2), g("k8scluster", 1)}},
		{"scan s-1 by severity", store.FindingQuery{ScanID: "s-1"}, "severity",
			[]store.FindingGroup{g("critical", 1), g("high", 2), g("informational", 1)}},
	} {
		if got := counts(c.q, c.by); !reflect.DeepEqual(got, c.want) {
			t.Errorf("counts %s after the upgrade: %v, want %v", c.name, got, c.want)
		}
	}
	// Every summary answers as the findings do.
	for _, q := range []store.FindingQuery{{}, {Latest: true}, {ScanID: "s-1"}, {ScanID: "s-2"}, {Severity: []string{"high"}}} {
		st, err := engine.FindingCountsScan(db.Dialect, tenant, q, store.CountDimensions)
		must(t, err, "FindingCountsScan")
		want, err := db.Groups(ctx, st, len(store.CountDimensions))
		must(t, err, "GROUP BY over findings")
		if got := counts(q, store.CountDimensions...); !reflect.DeepEqual(got, want) {
			t.Errorf("counts of %+v after the upgrade differ from a GROUP BY over findings:\n%s", q, groupDiff(got, want))
		}
	}
}

// OldProviderTypes are provider types as earlier releases stored them
// (lower-cased only) or as a row written by hand may hold them, for
// CheckProviderTypesNormalised: the migration's SQL must agree with
// ocsf.ProviderType on each, letters Go lower-cases into ASCII included.
var OldProviderTypes = []string{
	"aws", "google cloud", "azure-gov", "k8s_cluster", "AWS", "Oracle Cloud 2",
	"\u212Aubernetes", "\u0130bm", "ünïcode9", "-", "☁", " oci ", "",
}

// CheckProviderTypesNormalised reads, after the migration that brings
// stored rows to today's rules, the scans an upgrade test wrote before it:
// scan pt-<i> of tenant "t" with provider type OldProviderTypes[i]. Each
// holds ocsf.ProviderType of its old type; an empty type, which names no
// scanner, stays empty.
func CheckProviderTypesNormalised(t *testing.T, s store.Store) {
	t.Helper()
	scans, _, err := s.ListScans(ctxT(t), "t", store.ScanQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListScans")
	got := map[string]string{}
	for _, sc := range scans {
		got[sc.ID] = sc.ProviderType
	}
	for i, old := range OldProviderTypes {
		id := fmt.Sprintf("pt-%d", i)
		want := ""
		if old != "" {
			want = ocsf.ProviderType(old)
		}
		if g, ok := got[id]; !ok || g != want {
			t.Errorf("scan %s of old provider type %q: type %q after the upgrade (found: %v), want %q", id, old, g, ok, want)
		}
	}
}
