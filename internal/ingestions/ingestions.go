// Package ingestions is the one home of reading ingestions: a tenant's list
// with its filters, order and paging, one ingestion, and the error rows that
// say why its records (or all of it) were rejected. The REST API and the
// aggregated API adapt these reads to their wire formats; neither filters,
// orders or pages ingestions, nor decides that one is unknown, on its own.
package ingestions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
)

// ErrNotFound is an ingestion that the namespace does not hold: another
// tenant's is not found either.
var ErrNotFound = errors.New("ingestion not found")

// Sort keys of a list, and the order of a list that names none.
var (
	SortKeys    = []string{"inserted_at", "requested_at", "started_at", "completed_at"}
	DefaultSort = []string{"-inserted_at"}
)

// Query is a checked list request. Zero fields do not filter.
type Query struct {
	// Statuses keeps the ingestions in any of these statuses
	// (restapi.IngestionStatuses); nil keeps all, empty none.
	Statuses []string
	// InsertedOn and CompletedOn keep the ingestions created, or ended, on
	// that UTC date.
	InsertedOn, CompletedOn time.Time
	// Search keeps the ingestions whose id, file name or status holds it,
	// whatever its case.
	Search string
	// Sort is keys of SortKeys, each with a "-" for descending; the name
	// breaks ties. Nil is DefaultSort.
	Sort []string
	Page store.Page
}

// Page is one page of a list and the number of ingestions that match.
type Page struct {
	Items []*posturev1.Ingestion
	Count int
}

// Reader reads ingestions: the objects from the manager's cache, their error
// rows from the store.
type Reader struct {
	Client client.Reader
	// APIReader, when set, reads an ingestion the cache has not seen yet
	// (a read right after the upload that created it).
	APIReader client.Reader
	Store     store.IngestionErrors
}

// List is one page of namespace ns's ingestions that match q, in q's order.
// Ingestions are custom resources: the list is read from the cache and
// filtered, ordered and cut here.
func (r *Reader) List(ctx context.Context, ns string, q Query) (Page, error) {
	var list posturev1.IngestionList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return Page{}, fmt.Errorf("list the ingestions of namespace %s: %w", ns, err)
	}
	match := q.matcher()
	items := make([]*posturev1.Ingestion, 0, len(list.Items))
	for i := range list.Items {
		if match(&list.Items[i]) {
			items = append(items, &list.Items[i])
		}
	}
	order(items, q.Sort)
	size := max(q.Page.Size, 1)
	from := min(max(q.Page.Number-1, 0)*size, len(items))
	to := min(from+size, len(items))
	return Page{Items: items[from:to], Count: len(items)}, nil
}

func (q Query) matcher() func(*posturev1.Ingestion) bool {
	var checks []func(*posturev1.Ingestion) bool
	if q.Statuses != nil {
		checks = append(checks, func(i *posturev1.Ingestion) bool { return slices.Contains(q.Statuses, string(Phase(i))) })
	}
	for field, day := range map[string]time.Time{"inserted_at": q.InsertedOn, "completed_at": q.CompletedOn} {
		if day.IsZero() {
			continue
		}
		want := day.UTC().Format(time.DateOnly)
		checks = append(checks, func(i *posturev1.Ingestion) bool {
			t := Time(i, field)
			return t != nil && t.UTC().Format(time.DateOnly) == want
		})
	}
	if q.Search != "" {
		term := strings.ToLower(q.Search)
		checks = append(checks, func(i *posturev1.Ingestion) bool {
			return strings.Contains(i.Name, term) ||
				strings.Contains(strings.ToLower(FileName(i)), term) ||
				strings.Contains(string(Phase(i)), term)
		})
	}
	return func(i *posturev1.Ingestion) bool {
		for _, c := range checks {
			if !c(i) {
				return false
			}
		}
		return true
	}
}

func order(items []*posturev1.Ingestion, keys []string) {
	if keys == nil {
		keys = DefaultSort
	}
	slices.SortStableFunc(items, func(a, b *posturev1.Ingestion) int {
		for _, key := range keys {
			field, desc := strings.CutPrefix(key, "-")
			c := compareTimes(Time(a, field), Time(b, field))
			if desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// compareTimes orders nulls last in ascending order, as PostgreSQL does.
func compareTimes(a, b *time.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return a.Compare(*b)
}

// Get reads ingestion name of namespace ns.
func (r *Reader) Get(ctx context.Context, ns, name string) (*posturev1.Ingestion, error) {
	var ing posturev1.Ingestion
	key := types.NamespacedName{Namespace: ns, Name: name}
	err := r.Client.Get(ctx, key, &ing)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, &ing)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("read ingestion %s/%s: %w", ns, name, err)
	}
	return &ing, nil
}

// Errors is one page of the error rows of ingestion name of namespace ns,
// stored under tenant, and their number: ingestion-level rows first, then by
// record. An ingestion the namespace does not hold is ErrNotFound, never an
// empty list, which would hide a mistyped name.
func (r *Reader) Errors(ctx context.Context, tenant, ns, name string, page store.Page) ([]store.IngestionError, int, error) {
	if _, err := r.Get(ctx, ns, name); err != nil {
		return nil, 0, err
	}
	return r.Store.ListIngestionErrors(ctx, tenant, name, page)
}

// errorScanPage is what Error reads per page while looking for one row.
const errorScanPage = 500

// Error is the error row id of ingestion name, ErrNotFound when either is
// unknown.
func (r *Reader) Error(ctx context.Context, tenant, ns, name string, id int64) (store.IngestionError, error) {
	for page := 1; ; page++ {
		rows, count, err := r.Errors(ctx, tenant, ns, name, store.Page{Number: page, Size: errorScanPage})
		if err != nil {
			return store.IngestionError{}, err
		}
		for i := range rows {
			if rows[i].ID == id {
				return rows[i], nil
			}
		}
		if page*errorScanPage >= count || len(rows) == 0 {
			return store.IngestionError{}, ErrNotFound
		}
	}
}

// Phase is the spec's status of an ingestion: pending until the controller
// has written one.
func Phase(i *posturev1.Ingestion) posturev1.IngestionPhase {
	if i.Status.Phase == "" {
		return posturev1.IngestionPending
	}
	return i.Status.Phase
}

// Terminal says whether nothing will change the ingestion's status again.
func Terminal(i *posturev1.Ingestion) bool { return restapi.Terminal(string(Phase(i))) }

// Summary is the spec's record counts: before the controller has written a
// status, the total counted at upload and nothing processed.
func Summary(i *posturev1.Ingestion) posturev1.IngestionSummary {
	if i.Status.Phase == "" {
		return posturev1.IngestionSummary{Total: i.Spec.RecordCount}
	}
	return i.Status.Summary
}

// FileName is the uploaded report's name; empty for a declared source.
func FileName(i *posturev1.Ingestion) string {
	if i.Spec.Source.Upload != nil {
		return i.Spec.Source.Upload.Filename
	}
	return ""
}

// Source names how an Ingestion's report came (restapi.ReportSources):
// uploaded, or read from a declared ConfigMap, Secret or URL.
func Source(i *posturev1.Ingestion) string {
	src := i.Spec.Source
	switch {
	case src.Upload != nil:
		return "upload"
	case src.ConfigMapRef != nil:
		return "configmap"
	case src.SecretRef != nil:
		return "secret"
	case src.URL != nil:
		return "url"
	}
	return ""
}

// Report is what a scan says of the report it came from, read from the
// Ingestion that last wrote it: the file name (empty for a declared
// source), who submitted it and how (Source). All empty when that
// Ingestion is gone.
type Report struct{ FileName, UploadedBy, Source string }

// Reports reads the reports of scans in namespace ns, keyed by ingestion
// name. The REST API and the aggregated API both describe a scan's report
// with it, so they say the same. It reads the cache only, without
// APIReader: a scan exists only after its ingestion ran, so the cache has
// seen it, and an Ingestion deleted since would otherwise cost a read of
// the API server on every list.
func (r *Reader) Reports(ctx context.Context, ns string, scans []store.Scan) (map[string]Report, error) {
	out := map[string]Report{}
	for _, sc := range scans {
		if sc.IngestionID == "" {
			continue
		}
		if _, seen := out[sc.IngestionID]; seen {
			continue
		}
		var ing posturev1.Ingestion
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sc.IngestionID}, &ing)
		switch {
		case apierrors.IsNotFound(err):
			out[sc.IngestionID] = Report{}
			continue
		case err != nil:
			return nil, fmt.Errorf("read ingestion %s/%s, which wrote scan %s: %w", ns, sc.IngestionID, sc.ID, err)
		}
		out[sc.IngestionID] = Report{FileName: FileName(&ing), UploadedBy: ing.Spec.RequestedBy.User, Source: Source(&ing)}
	}
	return out, nil
}

// Time is the ingestion's time of a sort key (SortKeys), nil when it has
// none yet: requested_at falls back to the creation.
func Time(i *posturev1.Ingestion, field string) *time.Time {
	var t *metav1.Time
	switch field {
	case "inserted_at":
		t = &i.CreationTimestamp
	case "requested_at":
		t = i.Status.RequestedAt
		if t == nil {
			t = &i.CreationTimestamp
		}
	case "started_at":
		t = i.Status.StartedAt
	case "completed_at":
		t = i.Status.CompletedAt
	}
	if t == nil || t.IsZero() {
		return nil
	}
	v := t.Time
	return &v
}
