package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// FileSuffix is the only accepted report file name ending.
const FileSuffix = ".ocsf.json"

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

// errTooLarge marks the upload limit, independent of how the store wraps errors.
var errTooLarge = errors.New("upload exceeds the size limit")

type limitedReader struct {
	r        io.Reader
	left     int64
	exceeded bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// Probe one byte: a file of exactly the limit is fine.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.exceeded = true
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// readErrReader remembers the first error reading the request body gave,
// so a failed upload can be told apart from a failing store.
type readErrReader struct {
	r   io.Reader
	err error
}

func (e *readErrReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

func (s *Server) maxUpload() int64 {
	if s.MaxUploadBytes > 0 {
		return s.MaxUploadBytes
	}
	return DefaultMaxUploadBytes
}

// multipartSlack is what multipart framing may add to the file: part
// headers, boundaries and small fields around it.
const multipartSlack = 1 << 20

// MaxFilenameBytes bounds an uploaded report's name; the Ingestion CRD holds
// the same bound, so a name the API accepts is one the API server stores.
const MaxFilenameBytes = 255

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
	defer func() { observeUpload(start, budget.read, err) }()
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

// checkFilename refuses names that would be unsafe to show: the name is
// printed by kubectl and carried in events, where control characters repaint
// a terminal or forge lines, and a huge name bloats every listing.
func checkFilename(name string) *apiError {
	if name == "" {
		return newError(400, CodeInvalid, "the part file carries no file name; its name must end in "+FileSuffix).pointer("/data/attributes/file")
	}
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	if len(name) > MaxFilenameBytes {
		return errorf(400, CodeInvalid, "file name %q is %d bytes long; at most %d bytes are allowed", shown, len(name), MaxFilenameBytes).pointer("/data/attributes/file")
	}
	if !utf8.ValidString(name) {
		return errorf(400, CodeInvalid, "file name %q is not valid UTF-8", shown).pointer("/data/attributes/file")
	}
	for i, c := range name {
		if isControl(c) {
			return errorf(400, CodeInvalid, "file name %q has the control character %U at byte %d; control characters are not allowed", shown, c, i).pointer("/data/attributes/file")
		}
	}
	if !strings.HasSuffix(name, FileSuffix) {
		return errorf(400, CodeInvalid, "file name %q must end in %s", name, FileSuffix).pointer("/data/attributes/file")
	}
	return nil
}

// printable replaces control characters, so text from a request can be
// shown in an answer or a log without acting on a terminal.
func printable(s string) string {
	return strings.Map(func(c rune) rune {
		if isControl(c) {
			return utf8.RuneError
		}
		return c
	}, s)
}

// isControl is C0, DEL and C1: the ranges the Ingestion CRD's pattern excludes.
func isControl(c rune) bool {
	return c < 0x20 || (c >= 0x7f && c <= 0x9f)
}

func (s *Server) tooLarge() *apiError {
	return errorf(413, CodeFileTooLarge, "the report is larger than the upload limit of %d bytes", s.maxUpload()).pointer("/data/attributes/file")
}

func (s *Server) ingestPart(w http.ResponseWriter, r *http.Request, p auth.Principal, filename string, body io.Reader) error {
	ctx := r.Context()
	if aerr := checkFilename(filename); aerr != nil {
		return aerr
	}
	src := &readErrReader{r: body}
	limited := &limitedReader{r: src, left: s.maxUpload()}
	counting := ocsf.NewCountingReader(limited)
	blob, err := s.Store.PutBlob(ctx, p.Tenant, failFast{counting})
	if err != nil {
		var mbe *http.MaxBytesError
		if limited.exceeded || errors.As(err, &mbe) {
			return s.tooLarge()
		}
		var fe *ocsf.FileError
		if errors.As(err, &fe) {
			return errorf(400, CodeInvalid, "%s is not a valid OCSF report: %s", filename, fe.Error()).pointer("/data/attributes/file")
		}
		if src.err != nil {
			// The request body broke off (truncated multipart, client gone):
			// the client's problem, not the server's.
			return errorf(400, CodeInvalid, "reading the part file failed after %d bytes: %v", s.maxUpload()-limited.left, src.err).pointer("/data/attributes/file")
		}
		if ctx.Err() != nil {
			return errorf(400, CodeInvalid, "the upload was interrupted after %d bytes", s.maxUpload()-limited.left)
		}
		return fmt.Errorf("store upload: %w", err)
	}
	records, err := counting.Result()
	if err != nil {
		s.deleteBlob(p.Tenant, blob.ID)
		var fe *ocsf.FileError
		if errors.As(err, &fe) {
			return errorf(400, CodeInvalid, "%s is not a valid OCSF report: %s", filename, fe.Error()).pointer("/data/attributes/file")
		}
		return fmt.Errorf("count records: %w", err)
	}
	ing := &posturev1.Ingestion{
		ObjectMeta: metav1.ObjectMeta{
			Name:      uuid.NewString(),
			Namespace: p.Namespace,
			Labels:    map[string]string{posturev1.LabelTenant: p.Tenant},
		},
		Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{Upload: &posturev1.UploadSource{
				BlobID: blob.ID, Filename: filename, Size: blob.Size, SHA256: blob.SHA256,
			}},
			RecordCount: int64(records),
			RequestedBy: posturev1.Requester{User: p.User, APIKeyPrefix: p.KeyPrefix},
		},
	}
	if err := s.Client.Create(ctx, ing); err != nil {
		s.deleteBlob(p.Tenant, blob.ID)
		return fmt.Errorf("create Ingestion: %w", err)
	}
	s.Log.Info("ingestion accepted", "tenant", p.Tenant, "ingestion", ing.Name, "file", filename, "records", records, "bytes", blob.Size)
	w.Header().Set("Location", "/api/v1/ingestions/"+ing.Name)
	writeJSON(w, http.StatusAccepted, document{Data: ingestionResource(r, ing, nil), Meta: meta{Version: APIVersion}})
	return nil
}

// failFast ends an upload as soon as the report is known to be malformed (an
// object instead of an array, a stray byte), so a large bad file is not
// stored whole only to be deleted.
type failFast struct{ c *ocsf.CountingReader }

func (f failFast) Read(p []byte) (int, error) {
	n, err := f.c.Read(p)
	if ferr := f.c.Err(); ferr != nil {
		return n, ferr
	}
	return n, err
}

// deleteBlob cleans up after a rejected upload; it must not depend on the
// request's context, which may be the reason for the cleanup.
func (s *Server) deleteBlob(tenant, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Store.DeleteBlob(ctx, tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.Log.Error(err, "deleting a rejected upload failed", "tenant", tenant, "blob", id)
	}
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
