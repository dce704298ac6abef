package webhook_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// blobCounter is what both engines offer tests to prove nothing was kept.
type blobCounter interface {
	CountBlobs(ctx context.Context, tenant string) (blobs, chunks int, err error)
}

func (b *bareEnv) stored(t testing.TB) (blobs, ingestions int) {
	t.Helper()
	n, _, err := b.Store.(blobCounter).CountBlobs(context.Background(), b.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	var list posturev1.IngestionList
	if err := b.Client.List(context.Background(), &list, inNamespace(b.Namespace)); err != nil {
		t.Fatal(err)
	}
	return n, len(list.Items)
}

// TestUploadRejected covers every whole-file problem, each sent by Go's
// multipart writer and by curl, and proves that a rejected upload leaves
// neither a blob nor a job behind.
func TestUploadRejected(t *testing.T) {
	const limit = 4096
	b := startBare(t, bareOpts{maxUpload: limit})
	a := b.api(t)

	cases := []struct {
		name      string
		file      string
		content   string
		fragments []string
	}{
		{"malformed JSON names the byte offset", "r.ocsf.json", `[{"a":1},{"b":]`, []string{"r.ocsf.json", "malformed JSON at byte 14", "record 1"}},
		{"bad literal", "r.ocsf.json", `[{"a":tru}]`, []string{"at byte 9"}},
		{"truncated", "r.ocsf.json", `[{"a":1},`, []string{"byte 9"}},
		{"trailing data", "r.ocsf.json", `[] []`, []string{"unexpected data at byte 3"}},
		{"empty file", "r.ocsf.json", ``, []string{"empty file"}},
		{"whitespace only", "r.ocsf.json", "  \n", []string{"empty file"}},
		{"top-level object", "r.ocsf.json", `{"class_uid":2004}`, []string{"expected a JSON array at byte 0", "an object"}},
		{"top-level string", "r.ocsf.json", `"[]"`, []string{"expected a JSON array at byte 0"}},
		{"invalid UTF-8", "r.ocsf.json", "[\"\xff\"]", []string{"invalid UTF-8", "byte 2"}},
		{"wrong name", "report.json", `[]`, []string{`"report.json"`, ".ocsf.json"}},
		{"name only almost right", "report.ocsf.json.txt", `[]`, []string{".ocsf.json"}},
		{"name that is only the suffix's cousin", "report.ocsf-json", `[]`, []string{".ocsf.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name+" (Go)", func(t *testing.T) {
			wantError(t, a.upload(tc.file, []byte(tc.content)), 400, "invalid", "pointer:/data/attributes/file", tc.fragments...)
		})
		t.Run(tc.name+" (curl)", func(t *testing.T) {
			// curl names the part after the file unless told otherwise.
			wantError(t, a.curlUpload("upload.ocsf.json", []byte(tc.content), ";filename="+tc.file), 400, "invalid", "pointer:/data/attributes/file", tc.fragments...)
		})
	}

	t.Run("multipart body without a file part", func(t *testing.T) {
		body, ct := multipartBody(t, part{"note", "", "hello"}, part{"report", "r.ocsf.json", "[]"})
		r := a.request(http.MethodPost, "/api/v1/ingestions", body, http.Header{"Content-Type": {ct}})
		wantError(t, r, 400, "invalid", "pointer:/data/attributes/file", "no part named file")
		r = a.curl("-F", "note=hello", "-F", "other=@"+writeTemp(t, "r.ocsf.json", "[]"))
		wantError(t, r, 400, "invalid", "pointer:/data/attributes/file", "no part named file")
		body, ct = multipartBody(t)
		r = a.request(http.MethodPost, "/api/v1/ingestions", body, http.Header{"Content-Type": {ct}})
		wantError(t, r, 400, "invalid", "pointer:/data/attributes/file", "no part named file")
	})
	t.Run("a file part without a file name", func(t *testing.T) {
		body, ct := multipartBody(t, part{"file", "", "[]"})
		r := a.request(http.MethodPost, "/api/v1/ingestions", body, http.Header{"Content-Type": {ct}})
		wantError(t, r, 400, "invalid", "pointer:/data/attributes/file", "no file name")
		r = a.curl("-F", "file=[]")
		wantError(t, r, 400, "invalid", "pointer:/data/attributes/file", "no file name")
	})
	t.Run("non-multipart bodies", func(t *testing.T) {
		for _, ct := range []string{"application/json", "application/vnd.api+json", "text/plain", "application/x-www-form-urlencoded", ""} {
			r := a.request(http.MethodPost, "/api/v1/ingestions", strings.NewReader("[]"), http.Header{"Content-Type": {ct}})
			wantError(t, r, 400, "invalid", "header:Content-Type", "multipart/form-data")
		}
		r := a.curl("--data-binary", "@"+writeTemp(t, "r.ocsf.json", "[]"), "-H", "Content-Type: application/json")
		wantError(t, r, 400, "invalid", "header:Content-Type", "multipart/form-data")
		r = a.curl("--data-binary", "[]")
		wantError(t, r, 400, "invalid", "header:Content-Type", "application/x-www-form-urlencoded")
	})
	t.Run("broken multipart framing", func(t *testing.T) {
		for _, tc := range []struct{ ct, body string }{
			{"multipart/form-data", "--x\r\n\r\n[]\r\n--x--"},
			{"multipart/form-data; boundary=x", "no boundary here"},
			{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"r.ocsf.json\"\r\n\r\n[]"},
		} {
			r := a.request(http.MethodPost, "/api/v1/ingestions", strings.NewReader(tc.body), http.Header{"Content-Type": {tc.ct}})
			wantError(t, r, 400, "invalid", "*")
		}
	})

	t.Run("413 past the upload limit", func(t *testing.T) {
		big := fixture(t, "aws_3_records.ocsf.json") // 8.7 KB
		wantError(t, a.upload("big.ocsf.json", big), 413, "file_too_large", "pointer:/data/attributes/file", "4096 bytes")
		wantError(t, a.curlUpload("big.ocsf.json", big, ""), 413, "file_too_large", "pointer:/data/attributes/file", "4096 bytes")
		// One byte over, and exactly at the limit.
		exact := append([]byte("[]"), bytes.Repeat([]byte(" "), limit-2)...)
		wantError(t, a.upload("over.ocsf.json", append(exact, ' ')), 413, "file_too_large", "pointer:/data/attributes/file")
		accepted(t, a.upload("exact.ocsf.json", exact), 0)
		accepted(t, a.curlUpload("exact.ocsf.json", exact, ""), 0)
		// A huge part before the file trips the body limit instead.
		huge := strings.Repeat("x", limit+2<<20)
		body, ct := multipartBody(t, part{"note", "", huge}, part{"file", "r.ocsf.json", "[]"})
		wantError(t, a.request(http.MethodPost, "/api/v1/ingestions", body, http.Header{"Content-Type": {ct}}),
			413, "file_too_large", "pointer:/data/attributes/file")
	})

	// Everything above was rejected except the two exact-limit uploads.
	if blobs, jobs := b.stored(t); blobs != 2 || jobs != 2 {
		t.Fatalf("after the rejections: %d blobs and %d ingestions stored, want 2 and 2", blobs, jobs)
	}

	t.Run("other parts around the file are ignored", func(t *testing.T) {
		body, ct := multipartBody(t, part{"note", "", "hello"}, part{"file", "r.ocsf.json", "[]"}, part{"file", "second.ocsf.json", "{"})
		accepted(t, a.request(http.MethodPost, "/api/v1/ingestions", body, http.Header{"Content-Type": {ct}}), 0)
		accepted(t, a.curl("-F", "note=hi", "-F", "file=@"+writeTemp(t, "x.ocsf.json", `[{},{}]`)), 2)
		// curl's ;type= and a path in the name change nothing.
		accepted(t, a.curl("-F", "file=@"+writeTemp(t, "y.ocsf.json", `[1]`)+";type=application/json;filename=dir/y.ocsf.json"), 1)
	})
	t.Run("the job records the file and who sent it", func(t *testing.T) {
		id := accepted(t, a.upload("who.ocsf.json", []byte(`[{"a":1}]`)), 1)
		var ing posturev1.Ingestion
		if err := b.Client.Get(context.Background(), keyOf(b.Namespace, id), &ing); err != nil {
			t.Fatal(err)
		}
		up := ing.Spec.Source.Upload
		if up == nil || up.Filename != "who.ocsf.json" || up.Size != 9 || len(up.SHA256) != 64 || ing.Spec.RecordCount != 1 ||
			ing.Spec.RequestedBy.User != "admin@example.com" || ing.Spec.RequestedBy.APIKeyPrefix != "pk_test" ||
			ing.Labels[posturev1.LabelTenant] != b.Tenant {
			t.Fatalf("Ingestion = %+v", ing.Spec)
		}
		rc, err := b.Store.OpenBlob(context.Background(), b.Tenant, up.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var got bytes.Buffer
		if _, err := got.ReadFrom(rc); err != nil || got.String() != `[{"a":1}]` {
			t.Fatalf("stored blob = %q, %v", got.String(), err)
		}
	})
}

func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// curl POSTs to /api/v1/ingestions with the given curl arguments.
func (a *api) curl(args ...string) response {
	a.t.Helper()
	hdr := filepath.Join(a.t.TempDir(), "headers")
	all := append([]string{"-sS", "-o", "-", "-D", hdr, "-w", "\n%{http_code}",
		"-H", "Authorization: " + a.auth, "-H", "Accept: application/vnd.api+json"}, args...)
	all = append(all, a.url+"/api/v1/ingestions")
	out, err := exec.Command("curl", all...).Output()
	if err != nil {
		a.t.Fatalf("curl %v: %v", args, err)
	}
	i := bytes.LastIndexByte(out, '\n')
	status, err := strconv.Atoi(string(out[i+1:]))
	if err != nil {
		a.t.Fatalf("curl output %q", out)
	}
	h := http.Header{}
	raw, _ := os.ReadFile(hdr)
	for _, line := range strings.Split(string(raw), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return response{status: status, header: h, body: out[:i]}
}
