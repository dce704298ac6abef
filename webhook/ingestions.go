package webhook

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/uploads"
)

// FileSuffix is the only accepted report file name ending.
const FileSuffix = uploads.FileSuffix

var ingestionFields = set("status", "summary", "requested_at", "started_at", "completed_at")

var ingestionList = listSpec{
	resourceType: "ingestions",
	filters:      set("status", "status__in", "completed_at", "inserted_at", "search"),
	sortKeys:     set("inserted_at", "requested_at", "started_at", "completed_at"),
	defaultSort:  []string{"-inserted_at"},
	fields:       ingestionFields,
}

var validStatuses = set(string(posturev1.IngestionPending), string(posturev1.IngestionProcessing),
	string(posturev1.IngestionCompleted), string(posturev1.IngestionFailed))

func (s *Server) ingestionRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/ingestions", s.methods(map[string]handlerFunc{
		http.MethodGet:  s.listIngestions,
		http.MethodPost: s.createIngestion,
	}))
	mux.Handle("/api/v1/ingestions/{id}", s.methods(map[string]handlerFunc{http.MethodGet: s.getIngestion}))
	mux.Handle("/api/v1/ingestions/{id}/errors", s.methods(map[string]handlerFunc{http.MethodGet: s.listIngestionErrors}))
}

func (s *Server) maxUpload() int64 {
	return s.uploads().Limit()
}

// uploads is the use case both front doors share.
func (s *Server) uploads() *uploads.Service {
	return &uploads.Service{Client: s.Client, Store: s.Store, Log: s.Log, MaxBytes: s.MaxUploadBytes}
}

// multipartSlack is what multipart framing may add to the file: part
// headers, boundaries and small fields around it.
const multipartSlack = 1 << 20

// MaxFilenameBytes bounds an uploaded report's name.
const MaxFilenameBytes = uploads.MaxFilenameBytes

// maxPartHeaderBytes bounds what the multipart reader may consume to find a
// part and read its headers. Go's reader allows 10 MiB of headers, enough for
// a file name that the API server then refuses with a 500.
const maxPartHeaderBytes = 64 << 10

// errPartHeaderTooLarge marks a part whose headers exceed maxPartHeaderBytes.
var errPartHeaderTooLarge = errors.New("multipart part header too large")

// budgetReader fails once left bytes have been read; left < 0 is unlimited.
type budgetReader struct {
	r    io.Reader
	left int64
	// read counts every byte of the body, for the upload metrics.
	read int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, errPartHeaderTooLarge
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	b.read += int64(n)
	return n, err
}

// createIngestion is POST /api/v1/ingestions: stream the part "file" into a blob
// while counting its records, then create the Ingestion (pending) and answer 202.
//
// Checks run cheapest first and nothing is read from the body before the
// headers pass: 401/429/402/403 (credentials), 400 (Content-Type), 413 (a
// declared Content-Length past the limit), then the body: 400 for a bad part
// header or file name, 413 once the file passes the limit, 400 for a bad
// report.
func (s *Server) createIngestion(w http.ResponseWriter, r *http.Request) (err error) {
	p, err := s.authorize(r, posturev1.PermissionManageIngestions)
	if err != nil {
		return err
	}
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "multipart/form-data" {
		return errorf(400, CodeInvalid, "the request must be multipart/form-data with one part named file holding a %s report; Content-Type was %q", FileSuffix, r.Header.Get("Content-Type")).headerSource("Content-Type")
	}
	// A body declared too large is refused from its header alone: reading it
	// only to reject it would let one request fill the store for minutes.
	// net/http closes the connection rather than drain such a body.
	if r.ContentLength > s.maxUpload()+multipartSlack {
		w.Header().Set("Connection", "close")
		return s.tooLarge()
	}
	if params["boundary"] == "" {
		return newError(400, CodeInvalid, "malformed multipart body: the Content-Type has no boundary parameter").headerSource("Content-Type")
	}
	// A body read blocks on the client, not on the request's context: when a
	// shutdown cuts this request off, the read must be ended too.
	stop := context.AfterFunc(r.Context(), func() {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	})
	defer stop()
	// A chunked body has no declared length; it is cut at the limit instead.
	budget := &budgetReader{r: http.MaxBytesReader(w, r.Body, s.maxUpload()+multipartSlack)}
	// Measured from here: what came before is refused from the headers alone.
	start := time.Now()
	defer func() {
		observeUpload(start, budget.read, err)
		if err != nil {
			// A refusal leaves the rest of the body unread. net/http would
			// read up to 256 KiB of it before sending the answer, to keep
			// the connection; a chunked upload that is slow or stalls
			// would hold the 413 (or 400) back meanwhile.
			w.Header().Set("Connection", "close")
		}
	}()
	mr := multipart.NewReader(budget, params["boundary"])
	for {
		budget.left = maxPartHeaderBytes
		part, err := mr.NextPart()
		budget.left = -1
		if errors.Is(err, io.EOF) {
			return newError(400, CodeInvalid, "the multipart body has no part named file; send the report as -F file=@report"+FileSuffix).pointer("/data/attributes/file")
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return s.tooLarge()
			}
			if errors.Is(err, errPartHeaderTooLarge) {
				return errorf(400, CodeInvalid, "a part's headers (its file name included) exceed %d bytes; the file name may be at most %d bytes", maxPartHeaderBytes, MaxFilenameBytes).pointer("/data/attributes/file")
			}
			// The error may quote a header line: never echo its control
			// characters, which is what a bad file name often holds.
			return errorf(400, CodeInvalid, "malformed multipart body: %s", printable(err.Error())).pointer("/data/attributes/file")
		}
		if part.FormName() != "file" {
			_, _ = io.Copy(io.Discard, part)
			continue
		}
		return s.ingestPart(w, r, p, part.FileName(), part)
	}
}

// printable replaces control characters, so text from a request can be
// shown in an answer or a log without acting on a terminal.
func printable(s string) string { return uploads.Printable(s) }

func (s *Server) tooLarge() *apiError {
	return errorf(413, CodeFileTooLarge, "the report is larger than the upload limit of %d bytes", s.maxUpload()).pointer("/data/attributes/file")
}

func (s *Server) ingestPart(w http.ResponseWriter, r *http.Request, p auth.Principal, filename string, body io.Reader) error {
	ing, err := s.uploads().Accept(r.Context(), uploads.Request{
		Tenant: p.Tenant, Namespace: p.Namespace, Filename: filename, Body: body, BodyName: "the part file",
		RequestedBy: posturev1.Requester{User: p.User, APIKeyPrefix: p.KeyPrefix},
	})
	var ue *uploads.Error
	if errors.As(err, &ue) {
		if ue.Kind == uploads.TooLarge {
			return s.tooLarge()
		}
		e := newError(400, CodeInvalid, ue.Message)
		if ue.Kind != uploads.Interrupted {
			e = e.pointer("/data/attributes/file")
		}
		return e
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/ingestions/"+ing.Name)
	writeJSON(w, http.StatusAccepted, document{Data: ingestionResource(r, ing, nil), Meta: meta{Version: APIVersion}})
	return nil
}

// lookupIngestion finds a job of the caller's tenant; another tenant's is a 404.
func (s *Server) lookupIngestion(ctx context.Context, p auth.Principal, id string) (*posturev1.Ingestion, error) {
	notFound := errorf(404, CodeNotFound, "no ingestion %q in this tenant", id).parameter("id")
	if _, err := uuid.Parse(id); err != nil {
		return nil, notFound
	}
	var ing posturev1.Ingestion
	key := types.NamespacedName{Namespace: p.Namespace, Name: id}
	err := s.Client.Get(ctx, key, &ing)
	if apierrors.IsNotFound(err) && s.APIReader != nil {
		err = s.APIReader.Get(ctx, key, &ing)
	}
	if apierrors.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return &ing, nil
}

func (s *Server) getIngestion(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorize(r, posturev1.PermissionManageIngestions)
	if err != nil {
		return err
	}
	for name := range r.URL.Query() {
		if name != "fields[ingestions]" {
			return errorf(400, CodeInvalid, "unknown query parameter %q", name).parameter(name)
		}
	}
	q, aerr := parseList(r, listSpec{resourceType: "ingestions", fields: ingestionFields})
	if aerr != nil {
		return aerr
	}
	ing, err := s.lookupIngestion(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, document{Data: ingestionResource(r, ing, q.fields), Meta: meta{Version: APIVersion}})
	return nil
}

func (s *Server) listIngestions(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorize(r, posturev1.PermissionManageIngestions)
	if err != nil {
		return err
	}
	q, aerr := parseList(r, ingestionList)
	if aerr != nil {
		return aerr
	}
	match, aerr := ingestionFilter(q.filters)
	if aerr != nil {
		return aerr
	}
	var list posturev1.IngestionList
	if err := s.Client.List(r.Context(), &list, inNamespace(p.Namespace)); err != nil {
		return err
	}
	items := make([]*posturev1.Ingestion, 0, len(list.Items))
	for i := range list.Items {
		if match(&list.Items[i]) {
			items = append(items, &list.Items[i])
		}
	}
	sortIngestions(items, q.sort)
	return writeMemoryPage(w, r, q, items, func(ing *posturev1.Ingestion) resource { return ingestionResource(r, ing, q.fields) })
}

func ingestionFilter(f map[string]string) (func(*posturev1.Ingestion) bool, *apiError) {
	var checks []func(*posturev1.Ingestion) bool
	if v, ok := f["status"]; ok {
		if !validStatuses[v] {
			return nil, errorf(400, CodeInvalid, "filter[status] must be one of pending, processing, completed, failed; got %q", v).parameter("filter[status]")
		}
		checks = append(checks, func(i *posturev1.Ingestion) bool { return string(phaseOf(i)) == v })
	}
	if v, ok := f["status__in"]; ok {
		want := map[string]bool{}
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if !validStatuses[st] {
				return nil, errorf(400, CodeInvalid, "filter[status__in] takes comma-separated statuses from pending, processing, completed, failed; got %q", st).parameter("filter[status__in]")
			}
			want[st] = true
		}
		checks = append(checks, func(i *posturev1.Ingestion) bool { return want[string(phaseOf(i))] })
	}
	for _, key := range []string{"completed_at", "inserted_at"} {
		v, ok := f[key]
		if !ok {
			continue
		}
		day, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return nil, errorf(400, CodeInvalid, "filter[%s] must be a date like 2026-11-21; got %q", key, v).parameter("filter[" + key + "]")
		}
		field := key
		checks = append(checks, func(i *posturev1.Ingestion) bool {
			t := timeOf(i, field)
			return t != nil && t.UTC().Format(time.DateOnly) == day.Format(time.DateOnly)
		})
	}
	if v, ok := f["search"]; ok {
		term := strings.ToLower(v)
		checks = append(checks, func(i *posturev1.Ingestion) bool {
			return strings.Contains(i.Name, term) ||
				strings.Contains(strings.ToLower(fileOf(i)), term) ||
				strings.Contains(string(phaseOf(i)), term)
		})
	}
	return func(i *posturev1.Ingestion) bool {
		for _, c := range checks {
			if !c(i) {
				return false
			}
		}
		return true
	}, nil
}

func sortIngestions(items []*posturev1.Ingestion, keys []string) {
	slices.SortStableFunc(items, func(a, b *posturev1.Ingestion) int {
		for _, key := range keys {
			desc := strings.HasPrefix(key, "-")
			field := strings.TrimPrefix(key, "-")
			c := compareTimes(timeOf(a, field), timeOf(b, field))
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

func phaseOf(i *posturev1.Ingestion) posturev1.IngestionPhase {
	if i.Status.Phase == "" {
		return posturev1.IngestionPending
	}
	return i.Status.Phase
}

func fileOf(i *posturev1.Ingestion) string {
	if i.Spec.Source.Upload != nil {
		return i.Spec.Source.Upload.Filename
	}
	return ""
}

func timeOf(i *posturev1.Ingestion, field string) *time.Time {
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

func formatTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// ingestionResource renders the spec's job object. Before the controller has
// written a status the job is pending with the total counted at upload.
func ingestionResource(r *http.Request, i *posturev1.Ingestion, fields map[string]bool) resource {
	summary := i.Status.Summary
	if i.Status.Phase == "" {
		summary = posturev1.IngestionSummary{Total: i.Spec.RecordCount}
	}
	attrs := map[string]any{
		"status":       string(phaseOf(i)),
		"summary":      map[string]int64{"total": summary.Total, "processed": summary.Processed, "invalid": summary.Invalid},
		"requested_at": formatTime(timeOf(i, "requested_at")),
		"started_at":   formatTime(timeOf(i, "started_at")),
		"completed_at": formatTime(timeOf(i, "completed_at")),
	}
	if fields != nil {
		for k := range attrs {
			if !fields[k] {
				delete(attrs, k)
			}
		}
	}
	return resource{Type: "ingestions", ID: i.Name, Attributes: attrs,
		Links: map[string]any{"self": absoluteURL(r, mustURL("/api/v1/ingestions/"+i.Name))}}
}

var errorList = listSpec{resourceType: "ingestion-errors",
	fields: set("record_index", "finding_uid", "code", "detail", "pointer", "value")}

// listIngestionErrors is GET /api/v1/ingestions/{id}/errors: why records (or
// the whole job) were rejected, in record order.
func (s *Server) listIngestionErrors(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorize(r, posturev1.PermissionManageIngestions)
	if err != nil {
		return err
	}
	q, aerr := parseList(r, errorList)
	if aerr != nil {
		return aerr
	}
	ing, err := s.lookupIngestion(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	rows, count, err := s.Store.ListIngestionErrors(r.Context(), p.Tenant, ing.Name, store.Page{Number: q.page, Size: q.size})
	if err != nil {
		return err
	}
	pg, links, aerr := pageOf(r, q, count)
	if aerr != nil {
		return aerr
	}
	data := make([]resource, 0, len(rows))
	for _, e := range rows {
		var idx any
		if e.RecordIndex != nil {
			idx = *e.RecordIndex
		}
		attrs := map[string]any{
			"record_index": idx,
			"finding_uid":  e.FindingUID,
			"code":         e.Code,
			"detail":       e.Detail,
			"pointer":      e.Pointer,
			"value":        e.Value,
		}
		trim(attrs, q.fields)
		data = append(data, resource{Type: "ingestion-errors", ID: strconv.FormatInt(e.ID, 10), Attributes: attrs})
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
}
