package ingestions_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingestions"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/testenv"
)

var day = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func ingestion(name, file string, phase posturev1.IngestionPhase, created time.Time, completed *time.Time) *posturev1.Ingestion {
	ing := &posturev1.Ingestion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-a", CreationTimestamp: metav1.NewTime(created)},
		Spec:       posturev1.IngestionSpec{Source: posturev1.IngestionSource{Upload: &posturev1.UploadSource{Filename: file}}, RecordCount: 3},
	}
	ing.Status.Phase = phase
	if completed != nil {
		c := metav1.NewTime(*completed)
		ing.Status.CompletedAt = &c
	}
	return ing
}

func names(items []*posturev1.Ingestion) []string {
	out := make([]string, 0, len(items))
	for _, i := range items {
		out = append(out, i.Name)
	}
	return out
}

// TestList: the one list both doors read, its filters, order and paging.
func TestList(t *testing.T) {
	ended := day.Add(time.Hour)
	objs := []client.Object{
		ingestion("a", "aws.ocsf.json", posturev1.IngestionCompleted, day, &ended),
		ingestion("b", "azure.ocsf.json", posturev1.IngestionFailed, day.Add(time.Minute), &ended),
		ingestion("c", "gcp.ocsf.json", "", day.Add(24*time.Hour), nil),
		ingestion("d", "k8s.ocsf.json", posturev1.IngestionProcessing, day.Add(2*time.Minute), nil),
	}
	other := ingestion("x", "aws.ocsf.json", posturev1.IngestionCompleted, day, &ended)
	other.Namespace = "tenant-b"
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(append(objs, other)...).Build()
	r := &ingestions.Reader{Client: c}
	page := func(n, size int) store.Page { return store.Page{Number: n, Size: size} }
	for _, tc := range []struct {
		name  string
		q     ingestions.Query
		want  []string
		count int
	}{
		{"newest first by default", ingestions.Query{Page: page(1, 10)}, []string{"c", "d", "b", "a"}, 4},
		{"oldest first", ingestions.Query{Sort: []string{"inserted_at"}, Page: page(1, 10)}, []string{"a", "b", "d", "c"}, 4},
		{"nulls last ascending", ingestions.Query{Sort: []string{"completed_at"}, Page: page(1, 10)}, []string{"a", "b", "c", "d"}, 4},
		{"a status not written yet is pending", ingestions.Query{Statuses: []string{"pending"}, Page: page(1, 10)}, []string{"c"}, 1},
		{"any of several statuses", ingestions.Query{Statuses: []string{"completed", "failed"}, Page: page(1, 10)}, []string{"b", "a"}, 2},
		{"no status matches nothing", ingestions.Query{Statuses: []string{}, Page: page(1, 10)}, []string{}, 0},
		{"the UTC date of creation", ingestions.Query{InsertedOn: day.Add(24 * time.Hour), Page: page(1, 10)}, []string{"c"}, 1},
		{"the UTC date of completion", ingestions.Query{CompletedOn: day, Page: page(1, 10)}, []string{"b", "a"}, 2},
		{"search in the file name, any case", ingestions.Query{Search: "AZURE", Page: page(1, 10)}, []string{"b"}, 1},
		{"search in the status", ingestions.Query{Search: "process", Page: page(1, 10)}, []string{"d"}, 1},
		{"a page", ingestions.Query{Page: page(2, 3)}, []string{"a"}, 4},
		{"past the last page", ingestions.Query{Page: page(3, 3)}, []string{}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.List(context.Background(), "tenant-a", tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got.Items), tc.want) || got.Count != tc.count {
				t.Errorf("List = %v (count %d), want %v (count %d)", names(got.Items), got.Count, tc.want, tc.count)
			}
		})
	}
}

// TestErrorsOfAnUnknownIngestion: an ingestion the namespace does not hold
// has no error list, not an empty one; the doors answer 404.
func TestErrorsOfAnUnknownIngestion(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "posture.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	known := ingestion("known", "aws.ocsf.json", posturev1.IngestionFailed, day, nil)
	other := ingestion("theirs", "aws.ocsf.json", posturev1.IngestionFailed, day, nil)
	other.Namespace = "tenant-b"
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(known, other).Build()
	r := &ingestions.Reader{Client: c, Store: st}
	if err := st.StartRun(ctx, "tenant-a", "known", 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteBatch(ctx, "tenant-a", "known", 1, store.Batch{Errors: []store.IngestionError{{Code: "worker_failed", Detail: "gone"}}}); err != nil {
		t.Fatal(err)
	}
	rows, n, err := r.Errors(ctx, "tenant-a", "tenant-a", "known", store.Page{Number: 1, Size: 10})
	if err != nil || n != 1 || len(rows) != 1 {
		t.Fatalf("Errors(known) = %v, %d, %v; want its one row", rows, n, err)
	}
	if row, err := r.Error(ctx, "tenant-a", "tenant-a", "known", rows[0].ID); err != nil || row.Code != "worker_failed" {
		t.Errorf("Error(known, %d) = %+v, %v", rows[0].ID, row, err)
	}
	for _, name := range []string{"missing", "theirs"} {
		if _, _, err := r.Errors(ctx, "tenant-a", "tenant-a", name, store.Page{Number: 1, Size: 10}); !errors.Is(err, ingestions.ErrNotFound) {
			t.Errorf("Errors(%s) = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := r.Error(ctx, "tenant-a", "tenant-a", "known", rows[0].ID+1); !errors.Is(err, ingestions.ErrNotFound) {
		t.Errorf("Error of an unknown row = %v, want ErrNotFound", err)
	}
}
