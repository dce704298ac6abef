package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

// BenchReads loads n findings (the write benchmark's records, with their
// ~3.5 KB raw record, spread over four accounts) into a fresh tenant and
// times the findings reads the API makes: a page of each documented kind,
// the count that comes with it, and the grouped counts of an overview.
// analyze, if not nil, runs after the load (PostgreSQL's ANALYZE, which
// autovacuum would run soon after a real load). It is the store half of issue 15's read benchmark; the REST half (make
// bench's read phase) does not exist yet.
func BenchReads(b *testing.B, s store.Store, n int, analyze func(context.Context) error) {
	ctx := context.Background()
	const tenant = "bench-reads"
	if err := s.StartRun(ctx, tenant, "ing-reads", 1, n); err != nil {
		b.Fatal(err)
	}
	for from := 0; from < n; from += BatchSize {
		fs := make([]store.Finding, 0, BatchSize)
		for i := from; i < min(n, from+BatchSize); i++ {
			f := benchFinding(fmt.Sprintf("reads-%08d", i), i)
			f.ProviderUID = fmt.Sprintf("%012d", 111111111111*(i%4+1))
			f.ScanID = "scan-" + f.ProviderUID
			fs = append(fs, f)
		}
		if err := s.WriteBatch(ctx, tenant, "ing-reads", 1, store.Batch{Findings: fs}); err != nil {
			b.Fatal(err)
		}
	}
	if analyze != nil {
		if err := analyze(ctx); err != nil {
			b.Fatal(err)
		}
	}
	def := []string{"-inserted_at"}
	mid, _, err := s.ListFindings(ctx, tenant, store.FindingQuery{Sort: def, Page: store.Page{Number: n / 20, Size: 10}})
	if err != nil || len(mid) == 0 {
		b.Fatalf("middle page: %d rows, %v", len(mid), err)
	}
	after := store.KeyOf(&mid[0])
	for _, tc := range []struct {
		name string
		q    store.FindingQuery
	}{
		{"first page", store.FindingQuery{Sort: def}},
		{"page 1000 by number", store.FindingQuery{Sort: def, Page: store.Page{Number: 1000}}},
		{"page 1000 by number, sort -severity_id", store.FindingQuery{Sort: []string{"-severity_id"}, Page: store.Page{Number: 1000}}},
		{"cursor page in the middle", store.FindingQuery{Sort: def, After: &after}},
		{"sort uid", store.FindingQuery{Sort: []string{"uid"}}},
		{"sort -time", store.FindingQuery{Sort: []string{"-time"}}},
		{"filter severity", store.FindingQuery{Sort: def, Severity: []string{"critical"}}},
		{"filter check_id", store.FindingQuery{Sort: def, CheckID: benchChecks[0]}},
		{"filter scan", store.FindingQuery{Sort: def, ScanID: "scan-111111111111"}},
		{"filter region and provider type", store.FindingQuery{Sort: def, Region: "eu-west-1", ProviderType: []string{"aws"}}},
		{"search", store.FindingQuery{Sort: def, Search: "bucket-000123"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.ListFindings(ctx, tenant, tc.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("overview counts", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.FindingCounts(ctx, tenant, store.FindingQuery{}, []string{"severity", "status_code", "provider_type", "provider_uid"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
