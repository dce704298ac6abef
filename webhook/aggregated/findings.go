package aggregated

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/termsafe"
)

// DefaultListLimit is the page size of a list that sets no limit, and the
// most one page may hold: a list never loads all of a tenant's findings.
const (
	DefaultListLimit = 500
	MaxListLimit     = 1000
)

// findingSort is the order findings are listed in: newest first, the
// order the REST API lists in by default.
var findingSort = []string{"-inserted_at"}

// base is what every resource's storage shares: nothing to tear down, and
// a namespace, the tenant's.
type base struct{}

func (base) Destroy()              {}
func (base) NamespaceScoped() bool { return true }

type findingStorage struct {
	base
	s *Server
}

var (
	_ rest.Getter               = &findingStorage{}
	_ rest.Lister               = &findingStorage{}
	_ rest.Scoper               = &findingStorage{}
	_ rest.SingularNameProvider = &findingStorage{}
)

func (*findingStorage) New() runtime.Object     { return &datav1.Finding{} }
func (*findingStorage) NewList() runtime.Object { return &datav1.FindingList{} }
func (*findingStorage) GetSingularName() string { return "finding" }

func resource(r string) schema.GroupResource {
	return schema.GroupResource{Group: datav1.GroupName, Resource: r}
}

func (f *findingStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	tenant, err := f.s.tenants.tenantOf(ctx, "findings")
	if err != nil {
		return nil, err
	}
	row, err := f.s.opts.Store.GetFinding(ctx, tenant.Name, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierrors.NewNotFound(resource("findings"), name)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := toFinding(&row, tenant.NamespaceName())
	if len(row.Raw) > 0 {
		out.Record = &runtime.RawExtension{Raw: row.Raw}
	}
	return out, nil
}

// selectorFilters reads a field selector as exact matches on the fields a
// kind allows; != and set operators are refused with the field's name.
func selectorFilters(sel fields.Selector, kind string, allowed []string) (map[string]string, error) {
	out := map[string]string{}
	if sel == nil || sel.Empty() {
		return out, nil
	}
	ok := map[string]bool{"metadata.namespace": true, "metadata.name": true}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, req := range sel.Requirements() {
		if !ok[req.Field] {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %q is not supported for %s; supported: metadata.name, metadata.namespace, %s",
				req.Field, kind, strings.Join(allowed, ", ")))
		}
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s%s%s: only = and == are supported", req.Field, req.Operator, req.Value))
		}
		if prev, dup := out[req.Field]; dup && prev != req.Value {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s is given twice (%q and %q); a %s has one", req.Field, prev, req.Value, req.Field))
		}
		if req.Value == "" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s must not be empty", req.Field))
		}
		out[req.Field] = req.Value
	}
	return out, nil
}

// matchesNoLabels is false when a label selector can match nothing: these
// objects carry no labels.
func matchesNoLabels(opts *metainternalversion.ListOptions) bool {
	return opts == nil || opts.LabelSelector == nil || opts.LabelSelector.Matches(labels.Set{})
}

func listLimit(opts *metainternalversion.ListOptions) int {
	if opts == nil || opts.Limit <= 0 {
		return DefaultListLimit
	}
	return int(min(opts.Limit, MaxListLimit))
}

func (f *findingStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	tenant, err := f.s.tenants.tenantOf(ctx, "findings")
	if err != nil {
		return nil, err
	}
	list := &datav1.FindingList{Items: []datav1.Finding{}}
	var sel fields.Selector
	if opts != nil {
		sel = opts.FieldSelector
	}
	filters, err := selectorFilters(sel, "findings", datav1.FindingFieldSelectors)
	if err != nil || !matchesNoLabels(opts) {
		return list, err
	}
	if ns := filters["metadata.namespace"]; ns != "" && ns != tenant.NamespaceName() {
		return list, nil
	}
	q := store.FindingQuery{
		ProviderUID: filters["providerUID"], CheckID: filters["checkID"],
		ScanID: filters["scan"], IngestionID: filters["ingestion"], Sort: findingSort,
	}
	switch v, set := filters[datav1.LatestSelector]; {
	case !set || v == "false":
		delete(filters, datav1.LatestSelector)
	case v == "true":
		q.Latest = true
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s=%s: want %s=true (the current state) or %s=false (the whole history)",
			datav1.LatestSelector, v, datav1.LatestSelector, datav1.LatestSelector))
	}
	if v, set := filters[datav1.DeltaSelector]; set {
		if !q.Latest {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s describes the current state: add %s=true",
				datav1.DeltaSelector, datav1.LatestSelector))
		}
		if v != "new" && v != "changed" && v != "resolved" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s=%s: want new, changed or resolved", datav1.DeltaSelector, v))
		}
		q.Delta = v
	}
	v, set := filters[datav1.MutedSelector]
	var ok bool
	if q.Muted, ok = findings.Muted(v, set, q.Latest); !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s=%s: want true (only the muted findings), false (leave them out; "+
			"the default with %s=true) or any (both; the default of the history)", datav1.MutedSelector, v, datav1.LatestSelector))
	}
	if v := filters["severity"]; v != "" {
		if !findings.ValidSeverity(v) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector severity=%s: unknown severity; one of %s", v, strings.Join(findings.Severities, ", ")))
		}
		q.Severity = []string{v}
	}
	if v := filters["statusCode"]; v != "" {
		q.StatusCode = []string{v}
	}
	if name := filters["metadata.name"]; name != "" {
		// Whether one finding belongs to the current state is known only by
		// listing that state; a get by name answers any finding.
		if q.Latest {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector metadata.name cannot be combined with %s=true; "+
				"get the finding by name, or list the current state without metadata.name", datav1.LatestSelector))
		}
		row, err := f.s.opts.Store.GetFinding(ctx, tenant.Name, name)
		if errors.Is(err, store.ErrNotFound) {
			return list, nil
		}
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if matchesQuery(&row, q) {
			list.Items = append(list.Items, *toFinding(&row, tenant.NamespaceName()))
		}
		return list, nil
	}
	binding := findings.Binding(filters, findingSort)
	var after *store.FindingKey
	if opts != nil && opts.Continue != "" {
		k, err := findings.DecodeCursor(opts.Continue, binding)
		if err != nil {
			return nil, apierrors.NewBadRequest("continue token: " + err.Error() + "; pass the continue token of the previous page with the same field selector")
		}
		after = &k
	}
	page, err := findings.ReadAfter(ctx, f.s.opts.Store, tenant.Name, q, after, listLimit(opts))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	records := includeRecords(ctx)
	for i := range page.Rows {
		item := toFinding(&page.Rows[i], tenant.NamespaceName())
		if records && len(page.Rows[i].Raw) > 0 {
			item.Record = &runtime.RawExtension{Raw: page.Rows[i].Raw}
		}
		list.Items = append(list.Items, *item)
	}
	if page.Next != nil {
		list.Continue = findings.EncodeCursor(*page.Next, binding)
	}
	return list, nil
}

// matchesQuery applies q's exact filters to one row (a list by name).
func matchesQuery(f *store.Finding, q store.FindingQuery) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	one := func(want []string, got string) bool { return len(want) == 0 || strings.EqualFold(want[0], got) }
	muted := q.Muted == store.MutedAny || (q.Muted == store.MutedOnly) == (f.Mute != nil)
	return eq(q.ProviderUID, f.ProviderUID) && eq(q.CheckID, f.CheckID) && eq(q.ScanID, f.ScanID) &&
		eq(q.IngestionID, f.IngestionID) && one(q.Severity, f.Severity) && one(q.StatusCode, f.StatusCode) && muted
}

func toFinding(f *store.Finding, ns string) *datav1.Finding {
	out := &datav1.Finding{
		TypeMeta:   metav1.TypeMeta{APIVersion: datav1.SchemeGroupVersion.String(), Kind: "Finding"},
		ObjectMeta: metav1.ObjectMeta{Name: f.ID, Namespace: ns, CreationTimestamp: metav1.NewTime(f.InsertedAt)},
		UID:        f.UID, CheckID: f.CheckID, Title: f.Title, Severity: f.Severity, SeverityID: f.SeverityID,
		StatusCode: f.StatusCode, Status: f.Status, Region: f.Region, ProviderType: f.ProviderType,
		ProviderUID: f.ProviderUID, ResourceUID: f.ResourceUID, Scan: f.ScanID, Ingestion: f.IngestionID,
		Time: metav1.NewTime(f.Time), UpdatedAt: metav1.NewTime(f.UpdatedAt), Delta: f.Delta,
		FirstSeenAt: optionalTime(f.FirstSeenAt),
	}
	if f.Mute != nil {
		out.Muted, out.MuteRule, out.MuteReason = true, f.Mute.Rule, f.Mute.Reason
	}
	return out
}

func optionalTime(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	mt := metav1.NewTime(*t)
	return &mt
}

var findingColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "The finding's stable id."},
	{Name: "Severity", Type: "string", Description: "OCSF severity."},
	{Name: "Status Code", Type: "string", Description: "PASS, FAIL, MANUAL, ..."},
	{Name: "Check", Type: "string", Description: "The check that produced the finding (metadata.event_code)."},
	{Name: "Resource", Type: "string", Description: "The resource the finding is about."},
	{Name: "Provider", Type: "string", Description: "The provider account (type/uid)."},
	{Name: "Delta", Type: "string", Description: "In the current state (latest=true): new or changed since the run before; empty otherwise."},
	{Name: "First Seen", Type: "string", Description: "In the current state: since the account first reported the check's finding."},
	{Name: "Muted", Type: "string", Description: "The MuteRule that mutes the finding, empty when none does; its reason is muteReason (-o yaml) or the wide output's Mute Reason."},
	{Name: "Age", Type: "string", Description: "Since the finding was first stored."},
	{Name: "Mute Reason", Type: "string", Priority: 1, Description: "Why the MuteRule mutes the finding (-o wide)."},
}

func (*findingStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: findingColumns}
	add := func(f *datav1.Finding) {
		provider := f.ProviderUID
		if f.ProviderType != "" {
			provider = f.ProviderType + "/" + f.ProviderUID
		}
		firstSeen := ""
		if f.FirstSeenAt != nil {
			firstSeen = age(*f.FirstSeenAt)
		}
		t.Rows = append(t.Rows, row(f, f.Name, f.Severity, f.StatusCode, f.CheckID, f.ResourceUID, provider, f.Delta, firstSeen,
			f.MuteRule, age(f.CreationTimestamp), f.MuteReason))
	}
	return t, eachItem(obj, t, func(o runtime.Object) { add(o.(*datav1.Finding)) })
}

// row is one table row. kubectl prints cells as they come, and their text is
// the report's: every string cell goes through termsafe, so an escape
// sequence in a check id or resource uid is shown, not acted on.
func row(obj runtime.Object, cells ...any) metav1.TableRow {
	for i, c := range cells {
		if s, ok := c.(string); ok {
			cells[i] = termsafe.String(s)
		}
	}
	return metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}}
}

// eachItem calls add for obj or each item of a list, and carries the list's
// continue token into the table, which kubectl --chunk-size follows.
func eachItem(obj runtime.Object, t *metav1.Table, add func(runtime.Object)) error {
	if !meta.IsListType(obj) {
		add(obj)
		return nil
	}
	if lm, err := meta.ListAccessor(obj); err == nil {
		t.Continue = lm.GetContinue()
	}
	return meta.EachListItem(obj, func(o runtime.Object) error { add(o); return nil })
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// pageToken is the continue token of a list read by page number (scans,
// ingestion errors, whose store reads are small): the next page and a
// binding to the query, so a token is not reused with another selector.
func pageToken(next int, binding string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(next) + ":" + binding))
}

func readPageToken(opts *metainternalversion.ListOptions, binding string) (int, error) {
	if opts == nil || opts.Continue == "" {
		return 1, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(opts.Continue)
	n, bind, ok := strings.Cut(string(raw), ":")
	page, perr := strconv.Atoi(n)
	if err != nil || !ok || perr != nil || page < 1 {
		return 0, apierrors.NewBadRequest("continue token: not a token this API issued; pass the continue token of the previous page")
	}
	if bind != binding {
		return 0, apierrors.NewBadRequest("continue token: issued for another field selector; keep the selector of the request that returned it")
	}
	return page, nil
}
