package webhook_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/testenv"
)

// rawPost writes an upload request by hand, so a test controls the declared
// length and how much of the body is ever sent, then reads the answer while
// the connection stays open and the rest of the body never comes.
func rawPost(t testing.TB, base, authz string, declared int64, body string) (response, time.Duration) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	start := time.Now()
	fmt.Fprintf(conn, "POST /api/v1/ingestions HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nAccept: application/vnd.api+json\r\n"+
		"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: %d\r\n\r\n%s", u.Host, authz, declared, body)
	// Today's answer must come while the body is still owed; a server that
	// waits for the body would answer only when the deadline drops the read.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body was still owed (after %v): %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, time.Since(start)
}

// TestUploadDeclaredTooLarge: a body declared past the limit is refused from
// its headers, before any of it is read or stored; credentials are checked
// first, so an anonymous caller learns nothing about limits.
func TestUploadDeclaredTooLarge(t *testing.T) {
	const limit = 1 << 20
	b := startBare(t, bareOpts{maxUpload: limit})
	head := "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.ocsf.json\"\r\n\r\n[" + strings.Repeat(" ", 64<<10)
	cases := []struct {
		name     string
		declared int64
		authz    string
		status   int
		code     string
	}{
		{"2 GiB declared", 2147548905, "Api-Key " + b.key, 413, "file_too_large"},
		{"one byte past the limit and its framing allowance", limit + 1<<20 + 1, "Api-Key " + b.key, 413, "file_too_large"},
		{"no credentials first", 2147548905, "Api-Key pk_wrong.secret", 401, "not_authenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, took := rawPost(t, b.URL, tc.authz, tc.declared, head)
			wantError(t, r, tc.status, tc.code, "*")
			if took > 2*time.Second {
				t.Errorf("answered after %v; the answer must not wait for the body", took)
			}
			// The connection is still open and owes the body: nothing of
			// it may be in the store.
			blobs, chunks, err := b.Store.(blobCounter).CountBlobs(context.Background(), b.Tenant)
			if err != nil {
				t.Fatal(err)
			}
			if blobs != 0 || chunks != 0 {
				t.Fatalf("store holds %d blobs and %d chunks after a refused upload", blobs, chunks)
			}
		})
	}
	t.Run("a chunked body is still cut at the limit", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			w := bufio.NewWriter(pw)
			fmt.Fprint(w, "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.ocsf.json\"\r\n\r\n[")
			_, _ = w.WriteString(strings.Repeat(" ", limit+10))
			fmt.Fprint(w, "]\r\n--x--\r\n")
			_ = w.Flush()
			pw.Close()
		}()
		// An io.Reader of unknown length makes net/http send it chunked.
		r := b.api(t).request(http.MethodPost, "/api/v1/ingestions", struct{ io.Reader }{pr},
			http.Header{"Content-Type": {"multipart/form-data; boundary=x"}})
		wantError(t, r, 413, "file_too_large", "pointer:/data/attributes/file")
		if blobs, jobs := b.stored(t); blobs != 0 || jobs != 0 {
			t.Fatalf("%d blobs and %d ingestions stored after a 413", blobs, jobs)
		}
	})
}

// TestChunkedUploadPastTheLimitAnswersAtOnce: a chunked body (no declared
// length) is read up to the limit, and the 413 comes as soon as one byte
// more does, whatever the store is doing: here another connection holds
// SQLite's write lock, as a large write of another tenant would. The partial
// upload is removed afterwards, off the request.
func TestChunkedUploadPastTheLimitAnswersAtOnce(t *testing.T) {
	// Two whole chunks, so the last byte within the limit completes the
	// second chunk's write before the lock is taken.
	const limit = 2 << 20
	b := startBare(t, bareOpts{maxUpload: limit})
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w := bufio.NewWriter(conn)
	chunk := func(s string) {
		fmt.Fprintf(w, "%x\r\n%s\r\n", len(s), s)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintf(w, "POST /api/v1/ingestions HTTP/1.1\r\nHost: %s\r\nAuthorization: Api-Key %s\r\nAccept: application/vnd.api+json\r\n"+
		"Content-Type: multipart/form-data; boundary=x\r\nTransfer-Encoding: chunked\r\n\r\n", u.Host, b.key)
	chunk("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.ocsf.json\"\r\n\r\n[")
	for sent := 1; sent < limit; sent += 64 << 10 {
		chunk(strings.Repeat(" ", min(64<<10, limit-sent)))
	}
	ctx := context.Background()
	testenv.Eventually(t, 10*time.Second, "both chunks of the upload to be stored", func() (bool, string) {
		_, chunks, err := b.Store.(blobCounter).CountBlobs(ctx, b.Tenant)
		return err == nil && chunks == 2, fmt.Sprintf("%d chunks (%v)", chunks, err)
	})

	db, err := sql.Open("sqlite", b.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	unlock := func() {
		if locked {
			locked = false
			if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
			lock.Close()
		}
	}
	defer unlock()

	start := time.Now()
	chunk("  ")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer %v after the limit was passed: %v", time.Since(start), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	wantError(t, response{status: resp.StatusCode, header: resp.Header, body: body}, 413, "file_too_large", "pointer:/data/attributes/file")
	if took > 2*time.Second {
		t.Errorf("the 413 came %v after the limit was passed; it must not wait for the partial upload's removal", took)
	}

	unlock()
	blobs, chunks, err := b.Store.(blobCounter).CountBlobs(ctx, b.Tenant)
	if err != nil || blobs != 0 || chunks != 0 {
		t.Fatalf("after the 413 the store holds %d blobs and %d chunks (%v)", blobs, chunks, err)
	}
	var ings posturev1.IngestionList
	if err := b.Client.List(ctx, &ings, client.InNamespace(b.Namespace)); err != nil || len(ings.Items) != 0 {
		t.Fatalf("%d Ingestions after a 413 (%v)", len(ings.Items), err)
	}
}

// TestUploadFilenameRejected: names that would repaint a terminal or bloat
// every listing get a 400 before anything is stored, however they are
// spelled in the part header.
func TestUploadFilenameRejected(t *testing.T) {
	// Large enough that the 3 MiB name is read, not refused by its length.
	b := startBare(t, bareOpts{maxUpload: 8 << 20})
	a := b.api(t)
	post := func(disposition string) response {
		body := "--x\r\nContent-Disposition: form-data; name=\"file\"; " + disposition + "\r\n\r\n[]\r\n--x--\r\n"
		return a.request(http.MethodPost, "/api/v1/ingestions", strings.NewReader(body),
			http.Header{"Content-Type": {"multipart/form-data; boundary=x"}})
	}
	rfc2231 := func(name string) string { return "filename*=UTF-8''" + url.PathEscape(name) }
	long := strings.Repeat("a", 256-len(".ocsf.json")) + ".ocsf.json"
	cases := []struct {
		name        string
		disposition string
		fragments   []string
	}{
		{"ESC CR LF BEL in filename*", rfc2231("x\x1b[2J\r\nforged line\a.ocsf.json"), []string{"control character U+001B"}},
		{"ESC alone in filename*", rfc2231("\x1b]0;title\a.ocsf.json"), []string{"U+001B"}},
		{"NUL in filename*", rfc2231("a\x00.ocsf.json"), []string{"U+0000"}},
		{"TAB in filename*", rfc2231("a\tb.ocsf.json"), []string{"U+0009"}},
		{"DEL in filename*", rfc2231("a\x7f.ocsf.json"), []string{"U+007F"}},
		{"C1 CSI in filename*", rfc2231("a\u009b2J.ocsf.json"), []string{"U+009B"}},
		{"C1 NEL in filename*", rfc2231("a\u0085.ocsf.json"), []string{"U+0085"}},
		{"RIGHT-TO-LEFT OVERRIDE in filename*", rfc2231("invoice\u202Eexe.ocsf.json"), []string{`file name "invoice\u202eexe.ocsf.json"`, "bidirectional formatting character U+202E at byte 7"}},
		{"RIGHT-TO-LEFT OVERRIDE in a quoted filename", "filename=\"invoice\u202Eexe.ocsf.json\"", []string{"bidirectional formatting character U+202E"}},
		{"LEFT-TO-RIGHT ISOLATE in filename*", rfc2231("a\u2066b.ocsf.json"), []string{"U+2066"}},
		{"POP DIRECTIONAL ISOLATE in filename*", rfc2231("a\u2069b.ocsf.json"), []string{"U+2069"}},
		{"RIGHT-TO-LEFT MARK in filename*", rfc2231("a\u200Fb.ocsf.json"), []string{"U+200F"}},
		{"LINE SEPARATOR in filename*", rfc2231("a\u2028b.ocsf.json"), []string{"line separator U+2028"}},
		{"ESC in a quoted filename", "filename=\"a\x1b[31mred.ocsf.json\"", []string{"malformed MIME header"}},
		{"CR in a quoted filename", "filename=\"a\rb.ocsf.json\"", []string{"malformed"}},
		{"invalid UTF-8 in filename*", "filename*=UTF-8''a%FF.ocsf.json", []string{"UTF-8"}},
		{"256 bytes", "filename=\"" + long + "\"", []string{"256 bytes", "at most 255"}},
		{"256 bytes in filename*", rfc2231(long), []string{"256 bytes"}},
		{"300 bytes of two-byte characters", rfc2231(strings.Repeat("é", 145) + ".ocsf.json"), []string{"300 bytes"}},
		{"900 KiB", "filename=\"" + strings.Repeat("a", 900<<10) + ".ocsf.json\"", []string{"exceed", "255 bytes"}},
		{"3 MiB", "filename=\"" + strings.Repeat("a", 3<<20) + ".ocsf.json\"", []string{"exceed", "255 bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := post(tc.disposition)
			wantError(t, r, 400, "invalid", "pointer:/data/attributes/file", tc.fragments...)
			if strings.ContainsAny(string(r.body), "\x1b\a\r\x7f\u009b\u0085\u202e\u2066\u2069\u200f\u2028") {
				t.Errorf("the error echoes a raw control character: %q", r.body)
			}
		})
	}
	if blobs, jobs := b.stored(t); blobs != 0 || jobs != 0 {
		t.Fatalf("%d blobs and %d ingestions stored after refused names", blobs, jobs)
	}
	t.Run("255 bytes is accepted and stored as sent", func(t *testing.T) {
		name := long[1:]
		id := accepted(t, post("filename=\""+name+"\""), 0)
		var ing posturev1.Ingestion
		if err := b.Client.Get(context.Background(), keyOf(b.Namespace, id), &ing); err != nil {
			t.Fatal(err)
		}
		if got := ing.Spec.Source.Upload.Filename; got != name {
			t.Fatalf("stored name %q, want %q", got, name)
		}
	})
}

// TestIngestionCRDRefusesUnsafeFilenames: the API server holds the same
// bound as the REST API, so an Ingestion written with kubectl cannot carry
// such a name either.
func TestIngestionCRDRefusesUnsafeFilenames(t *testing.T) {
	b := startBare(t, bareOpts{})
	cases := []struct {
		name     string
		filename string
		ok       bool
	}{
		{"plain", "report.ocsf.json", true},
		{"255 characters", strings.Repeat("a", 245) + ".ocsf.json", true},
		{"unicode letters", "rapport-été.ocsf.json", true},
		{"256 characters", strings.Repeat("a", 246) + ".ocsf.json", false},
		{"ESC", "a\x1b[2J.ocsf.json", false},
		{"CR LF", "a\r\nforged.ocsf.json", false},
		{"BEL", "a\a.ocsf.json", false},
		{"NUL", "a\x00.ocsf.json", false},
		{"DEL", "a\x7f.ocsf.json", false},
		{"C1 CSI", "a\u009b2J.ocsf.json", false},
		{"RIGHT-TO-LEFT OVERRIDE", "invoice\u202Eexe.ocsf.json", false},
		{"FIRST STRONG ISOLATE", "a\u2068.ocsf.json", false},
		{"LEFT-TO-RIGHT MARK", "a\u200E.ocsf.json", false},
		{"ARABIC LETTER MARK", "a\u061C.ocsf.json", false},
		{"wrong suffix", "a.json", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing := &posturev1.Ingestion{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("crd-name-%d", i), Namespace: b.Namespace},
				Spec: posturev1.IngestionSpec{Source: posturev1.IngestionSource{Upload: &posturev1.UploadSource{
					BlobID: "b", Filename: tc.filename, SHA256: strings.Repeat("0", 64),
				}}},
			}
			err := b.Client.Create(context.Background(), ing)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("a valid name was refused: %v", err)
			case !tc.ok && !apierrors.IsInvalid(err):
				t.Fatalf("Create = %v; want Invalid naming spec.source.upload.filename", err)
			case !tc.ok && !strings.Contains(err.Error(), "spec.source.upload.filename"):
				t.Fatalf("the refusal does not name the field: %v", err)
			}
		})
	}
}
