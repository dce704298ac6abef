package aggregated

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/ingestions"
	"github.com/posture-dev/posture/internal/store"
)

type scanStorage struct {
	base
	s *Server
}

var (
	_ rest.Getter = &scanStorage{}
	_ rest.Lister = &scanStorage{}
)

func (*scanStorage) New() runtime.Object     { return &datav1.Scan{} }
func (*scanStorage) NewList() runtime.Object { return &datav1.ScanList{} }
func (*scanStorage) GetSingularName() string { return "scan" }

func (st *scanStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	tenant, err := st.s.tenants.tenantOf(ctx, "scans")
	if err != nil {
		return nil, err
	}
	sc, err := findings.Scan(ctx, st.s.opts.Store, tenant.Name, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierrors.NewNotFound(resource("scans"), name)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	reports, err := st.s.ingestions.Reports(ctx, tenant.NamespaceName(), []store.Scan{sc})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return toScan(&sc, reports[sc.IngestionID], tenant.NamespaceName()), nil
}

func (st *scanStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	tenant, err := st.s.tenants.tenantOf(ctx, "scans")
	if err != nil {
		return nil, err
	}
	list := &datav1.ScanList{Items: []datav1.Scan{}}
	var sel fields.Selector
	if opts != nil {
		sel = opts.FieldSelector
	}
	filters, err := selectorFilters(sel, "scans", datav1.ScanFieldSelectors)
	if err != nil || !matchesNoLabels(opts) {
		return list, err
	}
	binding := findings.Binding(filters, nil)
	page, err := readPageToken(opts, binding)
	if err != nil {
		return nil, err
	}
	size := listLimit(opts)
	rows, count, err := st.s.opts.Store.ListScans(ctx, tenant.Name, store.ScanQuery{
		ProviderType: filters["providerType"], ProviderUID: filters["providerUID"],
		IngestionID: filters["ingestion"],
		Page:        store.Page{Number: page, Size: size},
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	reports, err := st.s.ingestions.Reports(ctx, tenant.NamespaceName(), rows)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for i := range rows {
		if name := filters["metadata.name"]; name != "" && rows[i].ID != name {
			continue
		}
		list.Items = append(list.Items, *toScan(&rows[i], reports[rows[i].IngestionID], tenant.NamespaceName()))
	}
	if page*size < count {
		list.Continue = pageToken(page+1, binding)
	}
	return list, nil
}

// toScan is the store's scan with the report rep of the Ingestion that
// last wrote it (ingestions.Reader.Reports), the facts the REST API's scans
// carry.
func toScan(sc *store.Scan, rep ingestions.Report, ns string) *datav1.Scan {
	failCount, failCounts := findings.Failing(sc)
	out := &datav1.Scan{
		TypeMeta:     metav1.TypeMeta{APIVersion: datav1.SchemeGroupVersion.String(), Kind: "Scan"},
		ObjectMeta:   metav1.ObjectMeta{Name: sc.ID, Namespace: ns, CreationTimestamp: metav1.NewTime(sc.InsertedAt)},
		ProviderType: sc.ProviderType, ProviderUID: sc.ProviderUID, Trigger: sc.Trigger,
		Ingestion: sc.IngestionID, FindingCount: sc.FindingCount, UpdatedAt: metav1.NewTime(sc.UpdatedAt),
		FailCount: failCount, FailCounts: failCounts,
		FileName: optional(rep.FileName), UploadedBy: optional(rep.UploadedBy), Source: optional(rep.Source),
	}
	if !sc.ScannedAt.IsZero() {
		at := metav1.NewTime(sc.ScannedAt)
		out.ScannedAt = &at
	}
	return out
}

// optional is nil for an empty string, a value the API does not know, as
// the REST API's null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var scanColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "The scan's id (unmapped.scan_id, or derived per ingestion and provider)."},
	{Name: "Provider", Type: "string", Description: "The provider account (type/uid)."},
	{Name: "Findings", Type: "integer", Description: "How many findings the scan holds."},
	{Name: "Fail", Type: "integer", Description: "How many of them are FAIL; failCounts splits them by severity."},
	{Name: "Ingestion", Type: "string", Description: "The Ingestion that last wrote to the scan."},
	{Name: "Scanned", Type: "string", Description: "Since the scanner ran, as the scan's findings record it; <unknown> before it has one."},
	{Name: "Age", Type: "string", Description: "Since the scan was first stored."},
	{Name: "File", Type: "string", Priority: 1, Description: "The file name of the report that last wrote the scan (-o wide); empty for a declared source or once the Ingestion is deleted."},
	{Name: "Source", Type: "string", Priority: 1, Description: "How that report came: upload, configmap, secret or url (-o wide)."},
}

func (*scanStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: scanColumns}
	return t, eachItem(obj, t, func(o runtime.Object) {
		sc := o.(*datav1.Scan)
		t.Rows = append(t.Rows, row(sc, sc.Name, sc.ProviderType+"/"+sc.ProviderUID, int64(sc.FindingCount), sc.FailCount,
			sc.Ingestion, age(ptr.Deref(sc.ScannedAt, metav1.Time{})), age(sc.CreationTimestamp), ptr.Deref(sc.FileName, ""), ptr.Deref(sc.Source, "")))
	})
}

type errorStorage struct {
	base
	s *Server
}

var (
	_ rest.Getter = &errorStorage{}
	_ rest.Lister = &errorStorage{}
)

func (*errorStorage) New() runtime.Object     { return &datav1.IngestionError{} }
func (*errorStorage) NewList() runtime.Object { return &datav1.IngestionErrorList{} }
func (*errorStorage) GetSingularName() string { return "ingestionerror" }

// errorName is an error row's name: its ingestion and its row id, so a get
// needs no other lookup to know which ingestion to read.
func errorName(ingestion string, id int64) string { return ingestion + "." + strconv.FormatInt(id, 10) }

func (st *errorStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	tenant, err := st.s.tenants.tenantOf(ctx, "ingestionerrors")
	if err != nil {
		return nil, err
	}
	// An Ingestion's own name may hold dots (nightly.2026-11-24): the row
	// id follows the last one.
	dot := strings.LastIndexByte(name, '.')
	ing, idText := name[:max(dot, 0)], name[dot+1:]
	id, perr := strconv.ParseInt(idText, 10, 64)
	if dot <= 0 || perr != nil {
		return nil, apierrors.NewNotFound(resource("ingestionerrors"), name)
	}
	row, err := st.s.ingestions.Error(ctx, tenant.Name, tenant.NamespaceName(), ing, id)
	if errors.Is(err, ingestions.ErrNotFound) {
		return nil, apierrors.NewNotFound(resource("ingestionerrors"), name)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return toError(&row, ing, tenant.NamespaceName()), nil
}

func (st *errorStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	tenant, err := st.s.tenants.tenantOf(ctx, "ingestionerrors")
	if err != nil {
		return nil, err
	}
	list := &datav1.IngestionErrorList{Items: []datav1.IngestionError{}}
	var sel fields.Selector
	if opts != nil {
		sel = opts.FieldSelector
	}
	filters, err := selectorFilters(sel, "ingestionerrors", datav1.ErrorFieldSelectors)
	if err != nil {
		return nil, err
	}
	ing := filters["ingestion"]
	if ing == "" {
		return nil, apierrors.NewBadRequest("ingestion errors are listed per ingestion: add --field-selector ingestion=<Ingestion name>")
	}
	if !matchesNoLabels(opts) {
		return list, nil
	}
	binding := findings.Binding(filters, nil)
	page, err := readPageToken(opts, binding)
	if err != nil {
		return nil, err
	}
	size := listLimit(opts)
	rows, count, err := st.s.ingestions.Errors(ctx, tenant.Name, tenant.NamespaceName(), ing, store.Page{Number: page, Size: size})
	if errors.Is(err, ingestions.ErrNotFound) {
		// As the REST API's 404: an empty list would hide a mistyped name.
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: posturev1.GroupVersion.Group, Resource: "ingestions"}, ing)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for i := range rows {
		e := toError(&rows[i], ing, tenant.NamespaceName())
		if name := filters["metadata.name"]; name != "" && e.Name != name {
			continue
		}
		list.Items = append(list.Items, *e)
	}
	if page*size < count {
		list.Continue = pageToken(page+1, binding)
	}
	return list, nil
}

func toError(e *store.IngestionError, ingestion, ns string) *datav1.IngestionError {
	return &datav1.IngestionError{
		TypeMeta:   metav1.TypeMeta{APIVersion: datav1.SchemeGroupVersion.String(), Kind: "IngestionError"},
		ObjectMeta: metav1.ObjectMeta{Name: errorName(ingestion, e.ID), Namespace: ns},
		Ingestion:  ingestion, RecordIndex: e.RecordIndex, FindingUID: e.FindingUID,
		Code: e.Code, Detail: e.Detail, Pointer: e.Pointer, Value: e.Value,
	}
}

func (*errorStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Record", Type: "string"},
		{Name: "Code", Type: "string"},
		{Name: "Pointer", Type: "string"},
		{Name: "Detail", Type: "string"},
	}}
	return t, eachItem(obj, t, func(o runtime.Object) {
		e := o.(*datav1.IngestionError)
		rec := "-"
		if e.RecordIndex != nil {
			rec = fmt.Sprint(*e.RecordIndex)
		}
		t.Rows = append(t.Rows, row(e, e.Name, rec, e.Code, e.Pointer, e.Detail))
	})
}
