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

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ingestions"
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

// ingestions is the read use case both doors share.
func (s *Server) ingestions() *ingestions.Reader {
	return &ingestions.Reader{Client: s.Client, APIReader: s.APIReader, Store: s.Store}
}

// notFound answers an unknown ingestion id; another tenant's is unknown too.
func ingestionNotFound(id string) *apiError {
	return errorf(404, CodeNotFound, "no ingestion %q in this tenant", id).parameter("id")
}

// lookupIngestion finds a job of the caller's tenant. The API's ids are the
// UUIDs uploads get: any other name is not one of its jobs.
func (s *Server) lookupIngestion(ctx context.Context, p auth.Principal, id string) (*posturev1.Ingestion, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ingestionNotFound(id)
	}
	ing, err := s.ingestions().Get(ctx, p.Namespace, id)
	if errors.Is(err, ingestions.ErrNotFound) {
		return nil, ingestionNotFound(id)
	}
	return ing, err
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
	iq, aerr := ingestionQuery(q)
	if aerr != nil {
		return aerr
	}
	page, err := s.ingestions().List(r.Context(), p.Namespace, iq)
	if err != nil {
		return err
	}
	pg, links, aerr := pageOf(r, q, page.Count)
	if aerr != nil {
		return aerr
	}
	data := make([]resource, 0, len(page.Items))
	for _, ing := range page.Items {
		data = append(data, ingestionResource(r, ing, q.fields))
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
}

// ingestionQuery reads the list's filters into the use case's query.
func ingestionQuery(q listQuery) (ingestions.Query, *apiError) {
	iq := ingestions.Query{Search: q.filters["search"], Sort: q.sort, Page: store.Page{Number: q.page, Size: q.size}}
	if v, ok := q.filters["status"]; ok {
		if !validStatuses[v] {
			return iq, errorf(400, CodeInvalid, "filter[status] must be one of pending, processing, completed, failed; got %q", v).parameter("filter[status]")
		}
		iq.Statuses = []string{v}
	}
	if v, ok := q.filters["status__in"]; ok {
		in := []string{}
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if !validStatuses[st] {
				return iq, errorf(400, CodeInvalid, "filter[status__in] takes comma-separated statuses from pending, processing, completed, failed; got %q", st).parameter("filter[status__in]")
			}
			in = append(in, st)
		}
		if iq.Statuses == nil {
			iq.Statuses = in
		} else {
			// Both filters hold: status, if it is among status__in.
			iq.Statuses = slices.DeleteFunc(iq.Statuses, func(st string) bool { return !slices.Contains(in, st) })
		}
	}
	for key, day := range map[string]*time.Time{"completed_at": &iq.CompletedOn, "inserted_at": &iq.InsertedOn} {
		v, ok := q.filters[key]
		if !ok {
			continue
		}
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return iq, errorf(400, CodeInvalid, "filter[%s] must be a date like 2026-11-21; got %q", key, v).parameter("filter[" + key + "]")
		}
		*day = d
	}
	return iq, nil
}

func formatTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// ingestionResource renders the spec's job object.
func ingestionResource(r *http.Request, i *posturev1.Ingestion, fields map[string]bool) resource {
	summary := ingestions.Summary(i)
	attrs := map[string]any{
		"status":       string(ingestions.Phase(i)),
		"summary":      map[string]int64{"total": summary.Total, "processed": summary.Processed, "invalid": summary.Invalid},
		"requested_at": formatTime(ingestions.Time(i, "requested_at")),
		"started_at":   formatTime(ingestions.Time(i, "started_at")),
		"completed_at": formatTime(ingestions.Time(i, "completed_at")),
	}
	trim(attrs, fields)
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
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		return ingestionNotFound(id)
	}
	rows, count, err := s.ingestions().Errors(r.Context(), p.Tenant, p.Namespace, id, store.Page{Number: q.page, Size: q.size})
	if errors.Is(err, ingestions.ErrNotFound) {
		return ingestionNotFound(id)
	}
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
