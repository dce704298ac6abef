package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/testenv"
)

// TestUploadRecordsAccounts: an upload stores the accounts billing will
// charge with its blob, found in the pass that validates and counts it, so
// the controller never reads the report; a report naming more accounts
// than billing.MaxAccounts is refused, keeping neither blob nor job.
func TestUploadRecordsAccounts(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	ctx := context.Background()

	tests := []struct {
		name    string
		content []byte
	}{
		{"real report", fixture(t, "aws_1500_records.ocsf.json")},
		{"three accounts, first appearance order", testenv.AccountsReport(t, "333333333333", "111111111111", "333333333333", "222222222222")},
		{"no valid records", []byte(`[{"class_uid":2004}]`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := accepted(t, a.upload("r.ocsf.json", tc.content), recordCount(t, tc.content))
			var ing posturev1.Ingestion
			if err := b.Client.Get(ctx, keyOf(b.Namespace, id), &ing); err != nil {
				t.Fatal(err)
			}
			got, recorded, err := b.Store.BlobAccounts(ctx, b.Tenant, ing.Spec.Source.Upload.BlobID)
			if err != nil || !recorded {
				t.Fatalf("BlobAccounts = recorded %v, %v; want recorded", recorded, err)
			}
			want, err := billing.DiscoverAccounts(ctx, bytes.NewReader(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !slices.Equal(billing.FromStore(got), want) {
				t.Fatalf("recorded accounts %v, want %v", got, want)
			}
		})
	}

	t.Run("too many accounts", func(t *testing.T) {
		blobs, jobs := b.stored(t)
		content := testenv.AccountsReport(t, testenv.DistinctAccounts(billing.MaxAccounts+1)...)
		wantError(t, a.upload("many.ocsf.json", content), 400, "invalid", "pointer:/data/attributes/file",
			"many.ocsf.json", fmt.Sprintf("at most %d distinct accounts", billing.MaxAccounts), fmt.Sprintf("record %d", billing.MaxAccounts))
		if nb, nj := b.stored(t); nb != blobs || nj != jobs {
			t.Errorf("a refused upload left %d blobs and %d jobs, had %d and %d", nb, nj, blobs, jobs)
		}
	})
}
