package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// TestSearchEstimate holds the planner's estimate of a search's matches
// near the truth. A scanner's word is in the check id, the uid (which
// repeats the check id) and the title of the same findings: the index
// lookup and the test of each column each keep about those, and estimated
// apart they multiply into a share far below the true one, which made
// PostgreSQL read every match of a common word to sort them instead of
// walking the order's index until a page was full (engine.Dialect's
// Unestimated).
func TestSearchEstimate(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	const n, every = 6000, 10 // one finding in 10 is of the bucket check
	var fs []store.Finding
	for i := range n {
		check := fmt.Sprintf("iam_check_%d", i%7)
		if i%every == 0 {
			check = "s3_bucket_public_access"
		}
		fs = append(fs, store.Finding{UID: fmt.Sprintf("prowler-aws-%s-123456789012-us-east-1-%012x", check, i*7919),
			ScanID: "scan-1", CheckID: check, Title: "Check " + check, Severity: "low", SeverityID: 2, StatusCode: "FAIL",
			ProviderType: "aws", ProviderUID: "123456789012", ResourceUID: fmt.Sprintf("arn:aws:iam::123456789012:role/r-%d", i),
			Time: time.Now(), Raw: []byte(`{}`)})
	}
	if err := s.StartRun(ctx, "t", "ing", 1, n); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBatch(ctx, "t", "ing", 1, store.Batch{Findings: fs}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE findings"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name    string
		dialect engine.Dialect
		ok      bool
	}{
		{"as the store asks", engine.Postgres, true},
		// Without it the same statement is estimated far too low: the
		// check that this test can fail.
		{"the column test estimated too", func() engine.Dialect { d := engine.Postgres; d.Unestimated = nil; return d }(), false},
	} {
		t.Run(d.name, func(t *testing.T) {
			count, _, err := engine.FindingList(d.dialect, "t", store.FindingQuery{Search: "bucket"})
			if err != nil {
				t.Fatal(err)
			}
			var plan []struct {
				Plan struct {
					Plans []struct {
						Rows float64 `json:"Plan Rows"`
					} `json:"Plans"`
				} `json:"Plan"`
			}
			var out []byte
			if err := s.pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+count.SQL, count.Args...).Scan(&out); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 || len(plan[0].Plan.Plans) != 1 {
				t.Fatalf("plan %s: %v", out, err)
			}
			est, truth := plan[0].Plan.Plans[0].Rows, float64(n/every)
			t.Logf("estimated %.0f of %.0f", est, truth)
			if near := est >= truth/3; near != d.ok {
				t.Errorf("estimated %.0f matching findings of %.0f; within a third of them: %v, want %v", est, truth, near, d.ok)
			}
		})
	}
}
