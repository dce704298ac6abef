package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/restapi"
)

// upload is one report sent, what the server must answer, and what it did.
type upload struct {
	t    *tenant
	name string // unique in the run: the Ingestion's file name
	kind string
	// door is "rest" (POST /api/v1/ingestions) or "kube" (create uploads
	// through kube-apiserver).
	door string
	// spec is the report's records; nil for a body with none to model.
	spec *spec
	// content, when set, is the body itself (a malformed file).
	content []byte
	// authz is the REST credential; pace its bucket.
	authz string
	pace  *rate.Limiter
	// wantStatus is the answer the server must give; wantCode and
	// wantDetail (a part of it) the refusal's reason.
	wantStatus int
	wantCode   string
	wantDetail string

	mu    sync.Mutex
	state string // sent, accepted, refused, unknown
	id    string
	ended bool
	// checked is set once its ingestion's end was checked against spec.
	checked bool
}

const (
	stateAccepted = "accepted"
	stateRefused  = "refused"
	stateUnknown  = "unknown" // no answer: the manager died under it
)

// kinds of upload, with their weights.
var kinds = []struct {
	name   string
	weight int
}{
	{"valid.small", 22}, {"valid.medium", 12}, {"valid.large", 3}, {"mixed", 14}, {"invalid.all", 3}, {"empty", 2},
	{"reupload", 5}, {"kube.mixed", 6}, {"kube.small", 3},
	{"bad.truncated", 2}, {"bad.object", 2}, {"bad.name", 2}, {"bad.emptyfile", 1},
	{"oversize.declared", 2}, {"oversize.chunked", 1},
	{"refused.nosub", 2}, {"refused.viewer", 2}, {"refused.badkey", 2},
}

func pickKind(rng *rand.Rand) string {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	n := rng.IntN(total)
	for _, k := range kinds {
		if n < k.weight {
			return k.name
		}
		n -= k.weight
	}
	return kinds[0].name
}

var uploadSeq atomic.Int64

func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

// newUpload prepares an upload of kind for t.
func (w *world) newUpload(rng *rand.Rand, t *tenant, kind string) *upload {
	u := &upload{t: t, kind: kind, door: "rest", authz: "Api-Key " + t.admin.APIKey, pace: t.adminPace, wantStatus: http.StatusAccepted}
	u.name = fmt.Sprintf("%s-%s-%05d.ocsf.json", t.name, kind, uploadSeq.Add(1))
	valid := func(lo, hi int) *spec {
		n := between(rng, lo, hi)
		return &spec{from: t.reserve(n), n: n}
	}
	refuse := func(status int, code, detail string) {
		u.wantStatus, u.wantCode, u.wantDetail = status, code, detail
	}
	switch kind {
	case "valid.small":
		u.spec = valid(20, 200)
	case "valid.medium":
		u.spec = valid(500, 3000)
	case "valid.large":
		if w.cfg.Short {
			u.spec = valid(1500, 3000)
		} else {
			u.spec = valid(10000, 25000)
		}
	case "mixed", "kube.mixed":
		n := between(rng, 20, 200)
		s := mixedSpec(rng, t.reserve(n), n)
		u.spec = &s
	case "invalid.all":
		n := between(rng, 3, 20)
		s := allBadSpec(rng, t.reserve(n), n)
		u.spec = &s
	case "empty":
		u.spec = &spec{from: t.reserve(0)}
	case "kube.small":
		u.spec = valid(20, 100)
	case "reupload":
		orig := t.pickReuploadable(rng)
		if orig == nil {
			return nil
		}
		u.spec = orig.spec
	case "bad.truncated":
		s := valid(20, 100)
		b := s.bytes(t.gen)
		u.content = b[:len(b)*2/3]
		refuse(400, restapi.CodeInvalid, "(truncated JSON)")
		u.spec = s
	case "bad.object":
		u.content = []byte(`{"findings": []}`)
		refuse(400, restapi.CodeInvalid, "expected a JSON array at byte 0, found an object")
	case "bad.name":
		u.spec = valid(20, 50)
		u.name = strings.TrimSuffix(u.name, ".ocsf.json") + ".json"
		refuse(400, restapi.CodeInvalid, "must end in .ocsf.json")
	case "bad.emptyfile":
		u.content = []byte{}
		refuse(400, restapi.CodeInvalid, "empty file")
	case "oversize.declared":
		refuse(413, restapi.CodeFileTooLarge, "larger than the upload limit")
	case "oversize.chunked":
		// Real records, well past the limit: none may be stored.
		n := int(w.maxUpload/1000) + 1000
		u.spec = &spec{from: t.reserve(n), n: n}
		refuse(413, restapi.CodeFileTooLarge, "larger than the upload limit")
	case "refused.nosub":
		u.spec = valid(20, 50)
		u.authz, u.pace = "Api-Key "+w.nosub.APIKey, nil
		refuse(402, restapi.CodeSubscriptionRequired, "subscription")
	case "refused.viewer":
		u.spec = valid(20, 50)
		u.authz, u.pace = "Api-Key "+t.viewer.APIKey, t.viewerPace
		refuse(403, restapi.CodePermissionDenied, "manage_ingestions")
	case "refused.badkey":
		u.spec = valid(20, 50)
		u.authz, u.pace = "Api-Key pk_soakbad.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil
		refuse(401, restapi.CodeNotAuthenticated, "")
	}
	if strings.HasPrefix(kind, "kube.") {
		u.door, u.wantStatus, u.pace = "kube", http.StatusCreated, nil
	}
	return u
}

// pickReuploadable is an earlier accepted REST upload of a modest size,
// whose bytes a re-upload sends again.
func (t *tenant) pickReuploadable(rng *rand.Rand) *upload {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c []*upload
	for _, u := range t.uploads {
		u.mu.Lock()
		ok := u.state == stateAccepted && u.door == "rest" && u.spec != nil && u.spec.n <= 3000 && u.wantStatus == http.StatusAccepted
		u.mu.Unlock()
		if ok {
			c = append(c, u)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rng.IntN(len(c))]
}

// outstanding counts the tenant's accepted ingestions that have not ended.
func (t *tenant) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, u := range t.uploads {
		u.mu.Lock()
		if u.state == stateAccepted && !u.ended {
			n++
		}
		u.mu.Unlock()
	}
	return n
}

// uploader sends the tenant's reports one after another, with at most two
// of its ingestions unfinished at a time (a scanner waits for its push).
func (w *world) uploader(ctx context.Context, t *tenant) {
	rng := w.rng()
	for ctx.Err() == nil {
		for t.outstanding() >= 2 {
			if !sleep(ctx, 200*time.Millisecond) {
				return
			}
		}
		u := w.newUpload(rng, t, pickKind(rng))
		if u == nil {
			continue
		}
		t.mu.Lock()
		t.uploads = append(t.uploads, u)
		t.mu.Unlock()
		// An upload under way when the load ends is finished, not cut off:
		// its outcome must be known.
		sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		if u.door == "kube" {
			w.sendKube(sendCtx, u)
		} else {
			w.sendREST(sendCtx, u)
		}
		cancel()
		sleep(ctx, jitter(rng, 300*time.Millisecond))
	}
}

// body is the upload's report, streamed when large.
func (u *upload) body() (io.Reader, int64) {
	switch {
	case u.content != nil:
		return bytes.NewReader(u.content), int64(len(u.content))
	case u.spec.n > 5000:
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(u.spec.write(pw, u.t.gen)) }()
		return pr, -1
	}
	b := u.spec.bytes(u.t.gen)
	return bytes.NewReader(b), int64(len(b))
}

// multipartBody wraps a report as the upload's file part; size -1 streams
// it chunked.
func multipartBody(name string, r io.Reader, size int64) (io.Reader, string, int64) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	_, _ = mw.CreateFormFile(restapi.ReportField, name)
	headLen := head.Len()
	_ = mw.Close()
	tail := append([]byte(nil), head.Bytes()[headLen:]...)
	head.Truncate(headLen)
	body := io.MultiReader(bytes.NewReader(head.Bytes()), r, bytes.NewReader(tail))
	if size < 0 {
		return body, mw.FormDataContentType(), 0
	}
	return body, mw.FormDataContentType(), int64(headLen) + size + int64(len(tail))
}

// spaces is an endless report body of blanks.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func (w *world) sendREST(ctx context.Context, u *upload) {
	if u.pace != nil {
		_ = u.pace.Wait(ctx)
	}
	var body io.Reader
	var ctype string
	var length int64
	switch u.kind {
	case "oversize.declared":
		// Declared past the limit and its framing: refused from the
		// headers, so the body is never read (nor made).
		length = w.maxUpload + 2<<20
		body, ctype, _ = multipartBody(u.name, io.LimitReader(spaces{}, length), length)
	case "oversize.chunked":
		pr, pw := io.Pipe()
		go func() {
			err := u.spec.write(pw, u.t.gen)
			pw.CloseWithError(err)
		}()
		body, ctype, length = multipartBody(u.name, pr, -1)
	default:
		r, size := u.body()
		body, ctype, length = multipartBody(u.name, r, size)
	}
	start := time.Now()
	resp, err := w.api.Do(ctx, restapi.Call{Method: http.MethodPost, Path: restapi.PathIngestions, Body: body,
		ContentType: ctype, ContentLength: length, Authorization: u.authz})
	c := call{op: "upload." + u.kind, start: start, took: time.Since(start), want: []int{u.wantStatus}, what: u.name}
	var created restapi.ResourceDocument[restapi.Ingestion]
	fillCall(&c, resp, err)
	ok := w.rec.record(c)
	switch {
	case ok && c.status == http.StatusAccepted:
		if derr := resp.Decode(&created); derr != nil {
			w.probs.add("upload answer", "%s: 202 with an undecodable body: %v", u.name, derr)
			w.resolveLater(u)
			return
		}
		a := created.Data.Attributes
		if a.Status != restapi.IngestionPending || a.Summary.Total != int64(u.spec.n) || a.Summary.Processed != 0 || a.StartedAt != nil {
			w.probs.add("upload answer", "%s: 202 %+v, want pending with total %d, nothing processed", u.name, a, u.spec.n)
		}
		w.accepted(u, created.Data.ID)
	case ok:
		w.refused(u, c, err)
	default:
		w.resolveLater(u)
	}
}

// fillCall copies a restapi answer into c.
func fillCall(c *call, resp *restapi.Response, err error) {
	if resp != nil {
		c.status = resp.Status
		return
	}
	e, ok := err.(*restapi.Error)
	if !ok || e.Status == 0 {
		c.err = err
		if ok && e.Cause != nil {
			c.err = e.Cause
		}
		return
	}
	c.status = e.Status
	if len(e.Errors) > 0 {
		c.code = e.Errors[0].Code
	}
	if e.Cause != nil {
		// The answer came, its body broke off: a status is known.
		c.err = e.Cause
	}
}

// refused checks a refusal's reason: its code and what its detail says.
func (w *world) refused(u *upload, c call, err error) {
	u.mu.Lock()
	u.state = stateRefused
	u.mu.Unlock()
	detail := ""
	if e, ok := err.(*restapi.Error); ok {
		detail = e.Detail()
	}
	if c.code != u.wantCode || !strings.Contains(detail, u.wantDetail) {
		w.probs.add("refusal reason", "%s: %d %s %q, want %d %s saying %q", u.name, c.status, c.code, detail, u.wantStatus, u.wantCode, u.wantDetail)
	}
}

// resolveLater marks an upload whose outcome is unknown: the final check
// looks for its Ingestion by file name.
func (w *world) resolveLater(u *upload) {
	u.mu.Lock()
	u.state = stateUnknown
	u.mu.Unlock()
}

// accepted records an accepted upload and follows its ingestion.
func (w *world) accepted(u *upload, id string) {
	u.mu.Lock()
	u.state, u.id = stateAccepted, id
	u.mu.Unlock()
	t := u.t
	t.mu.Lock()
	if prev := t.byID[id]; prev != nil {
		w.probs.add("upload answer", "%s and %s got the same ingestion id %s", prev.name, u.name, id)
	}
	t.byID[id] = u
	t.mu.Unlock()
	w.followers.Add(1)
	go w.follow(u)
}

// sendKube uploads through kube-apiserver, as kubectl create --raw does,
// as the tenant's Kubernetes user.
func (w *world) sendKube(ctx context.Context, u *upload) {
	b := u.spec.bytes(u.t.gen)
	path := fmt.Sprintf("/apis/data.posture.dev/v1alpha1/namespaces/%s/uploads?filename=%s", u.t.ns, url.QueryEscape(u.name))
	start := time.Now()
	status, body, err := w.kubeDo(ctx, u.t, http.MethodPost, path, "application/json", bytes.NewReader(b))
	c := call{op: "upload." + u.kind, start: start, took: time.Since(start), status: status, err: err, want: []int{u.wantStatus}, what: u.name}
	if err == nil {
		c.code, c.err = kubeReason(status, body)
	}
	if !w.rec.record(c) {
		w.resolveLater(u)
		return
	}
	var ing posturev1.Ingestion
	if err := json.Unmarshal(body, &ing); err != nil || ing.Name == "" {
		w.probs.add("upload answer", "%s: 201 with an undecodable Ingestion: %v", u.name, err)
		w.resolveLater(u)
		return
	}
	if ing.Namespace != u.t.ns || ing.Spec.Source.Upload == nil || ing.Spec.Source.Upload.Filename != u.name || ing.Spec.RecordCount != int64(u.spec.n) {
		w.probs.add("upload answer", "%s: created Ingestion %s/%s with spec %+v, want one in %s of %d records", u.name, ing.Namespace, ing.Name, ing.Spec, u.t.ns, u.spec.n)
	}
	w.accepted(u, ing.Name)
}

// follow polls an accepted ingestion until it ends, then checks its
// result against the model.
func (w *world) follow(u *upload) {
	defer w.followers.Done()
	t := u.t
	deadline := time.Now().Add(w.cfg.Load + drainTimeout(w.cfg))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for ctx.Err() == nil {
		ing, ok := w.getIngestion(ctx, t, u.id, "ingestions.get")
		if ok {
			s := ing.Summary
			if s.Total != int64(u.spec.n) || s.Processed > s.Total || s.Invalid > s.Processed {
				w.probs.add("ingestion progress", "%s (%s): summary %+v of a report of %d records", u.id, u.name, s, u.spec.n)
			}
			if ing.Done() {
				u.mu.Lock()
				u.ended = true
				u.mu.Unlock()
				w.checkIngestion(ctx, u, ing)
				return
			}
		}
		if !sleep(ctx, time.Second) {
			break
		}
	}
	w.probs.add("ingestion never ended", "%s (%s, %d records) had not ended %s after the load began", u.id, u.name, u.spec.n, time.Since(w.start).Round(time.Second))
}

// getIngestion reads one ingestion as the tenant's admin.
func (w *world) getIngestion(ctx context.Context, t *tenant, id, op string) (restapi.Ingestion, bool) {
	_ = t.adminPace.Wait(ctx)
	start := time.Now()
	resp, err := w.api.Do(ctx, restapi.Call{Method: http.MethodGet, Path: restapi.PathIngestions + "/" + url.PathEscape(id),
		Authorization: "Api-Key " + t.admin.APIKey})
	if ctx.Err() != nil {
		// The load (or the follower's wait) ended under it: nobody's answer
		// to judge; a follower that ran out of time is reported by the
		// checks, as an ingestion that never ended.
		return restapi.Ingestion{}, false
	}
	c := call{op: op, start: start, took: time.Since(start), want: []int{200}, what: id}
	fillCall(&c, resp, err)
	if !w.rec.record(c) {
		return restapi.Ingestion{}, false
	}
	var doc restapi.ResourceDocument[restapi.Ingestion]
	if err := resp.Decode(&doc); err != nil || doc.Data.ID != id {
		w.probs.add("isolation", "GET /ingestions/%s as %s answered %s (%v)", id, t.name, doc.Data.ID, err)
		return restapi.Ingestion{}, false
	}
	return doc.Data.Attributes, true
}

// checkIngestion holds an ended ingestion to its report: the status, the
// summary, and one error row per refused record with the right code.
func (w *world) checkIngestion(ctx context.Context, u *upload, ing restapi.Ingestion) {
	s := u.spec
	want := restapi.IngestionCompleted
	if s.valid() == 0 {
		want = restapi.IngestionFailed
	}
	wantSum := restapi.IngestionSummary{Total: int64(s.n), Processed: int64(s.n), Invalid: int64(len(s.bad))}
	if ing.Status != want || ing.Summary != wantSum || ing.StartedAt == nil || ing.CompletedAt == nil {
		w.probs.add("ingestion result", "%s (%s): %s %+v, want %s %+v with both times", u.id, u.name, ing.Status, ing.Summary, want, wantSum)
	}
	rows, ok := w.allErrors(ctx, u.t, u.id)
	if !ok {
		return
	}
	wantRows := s.wantErrors()
	same := len(rows) == len(wantRows)
	for i := 0; same && i < len(rows); i++ {
		r := rows[i]
		idx := -1
		if r.RecordIndex != nil {
			idx = int(*r.RecordIndex)
		}
		same = idx == wantRows[i].index && r.Code == wantRows[i].code && r.Detail != ""
	}
	if !same {
		w.probs.add("refused records' reasons", "%s (%s): error rows %s, want %v", u.id, u.name, rowsText(rows), wantRows)
	}
	for _, r := range rows {
		if r.FindingUID != "" && !u.t.namesOwnAccount(r.FindingUID) {
			w.probs.add("isolation", "errors of %s (%s) name finding %s of another tenant", u.id, u.t.name, r.FindingUID)
		}
	}
	u.mu.Lock()
	u.checked = true
	u.mu.Unlock()
}

func rowsText(rows []restapi.IngestionError) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		idx := "job"
		if r.RecordIndex != nil {
			idx = fmt.Sprint(*r.RecordIndex)
		}
		parts[i] = idx + ":" + r.Code
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// allErrors reads every page of an ingestion's errors.
func (w *world) allErrors(ctx context.Context, t *tenant, id string) ([]restapi.IngestionError, bool) {
	var rows []restapi.IngestionError
	for page := 1; ; page++ {
		_ = t.adminPace.Wait(ctx)
		start := time.Now()
		resp, err := w.api.Do(ctx, restapi.Call{Method: http.MethodGet, Path: restapi.PathIngestions + "/" + url.PathEscape(id) + "/errors",
			Query: url.Values{"page[size]": {"100"}, "page[number]": {fmt.Sprint(page)}}, Authorization: "Api-Key " + t.admin.APIKey})
		c := call{op: "ingestions.errors", start: start, took: time.Since(start), want: []int{200}, what: id}
		fillCall(&c, resp, err)
		if !w.rec.record(c) {
			if c.status == 0 || restartRelated(c) {
				// The manager is away: read them again in a while.
				if sleep(ctx, 2*time.Second) {
					page--
					continue
				}
			}
			return nil, false
		}
		var doc restapi.ListDocument[restapi.IngestionError]
		if err := resp.Decode(&doc); err != nil {
			w.probs.add("errors answer", "errors of %s: %v", id, err)
			return nil, false
		}
		for _, r := range doc.Data {
			rows = append(rows, r.Attributes)
		}
		if doc.Links == nil || doc.Links.Next == nil {
			return rows, true
		}
	}
}
