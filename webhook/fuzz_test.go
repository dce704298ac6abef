package webhook_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/testenv"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const fuzzBoundary = "fuzzboundary0123456789"

// fuzzBody is a multipart body with one file part, framed like Go's and
// curl's clients do, with a fixed boundary so that seeds can be mutated as
// raw bodies too.
func fuzzBody(name string, content []byte) []byte {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.SetBoundary(fuzzBoundary)
	w, _ := mw.CreateFormFile("file", name)
	_, _ = w.Write(content)
	_ = mw.Close()
	return b.Bytes()
}

// expectUpload is the oracle: what the handler must make of body. It reads
// the multipart framing with the standard library, as the handler does, and
// judges the report with ocsf.Count, the fuzzed parser's own contract.
func expectUpload(body []byte, limit int64) (valid bool, content []byte, records int) {
	mr := multipart.NewReader(bytes.NewReader(body), fuzzBoundary)
	for {
		p, err := mr.NextPart()
		if err != nil {
			return false, nil, 0
		}
		if p.FormName() != "file" {
			_, _ = io.Copy(io.Discard, p)
			continue
		}
		data, err := io.ReadAll(p)
		name := p.FileName()
		if err != nil || name == "" || !strings.HasSuffix(name, ".ocsf.json") || int64(len(data)) > limit {
			return false, nil, 0
		}
		n, err := ocsf.Count(bytes.NewReader(data))
		if err != nil {
			return false, nil, 0
		}
		return true, data, n
	}
}

// FuzzUpload drives the upload handler (Server.Handler with an
// httptest.ResponseRecorder) with arbitrary file names, reports and
// multipart framing. Invariants: never a 5xx or a panic; 202 exactly for
// valid reports; an accepted upload is stored byte for byte with its record
// count; a rejected one leaves no blob behind.
//
// The store is real (SQLite in a temp dir). The Kubernetes client is
// controller-runtime's fake: envtest proved impractical inside the fuzz loop.
// Every fuzz worker is a separate process that would start its own
// kube-apiserver and etcd, those inherit the worker's pipes to the fuzzing
// coordinator, and runs with it stalled (no executions for minutes). The
// fake client does not apply the CRD's validation; TestUploadMutations runs
// the same checks against the real API server in every `go test`.
//
// mode selects the framing: even, content is the file of a well-formed
// multipart body named name; odd, content is the raw request body.
func FuzzUpload(f *testing.F) {
	for _, name := range []string{"aws_3_records.ocsf.json", "example_output_aws.ocsf.json", "example_output_azure.ocsf.json",
		"example_output_gcp.ocsf.json", "example_output_kubernetes.ocsf.json"} {
		data := fixture(f, name)
		f.Add(name, data, uint8(0))
		f.Add("", fuzzBody(name, data), uint8(1))
	}
	for _, s := range []string{``, `[]`, `{}`, `[{"a":1},]`, `[1,"a",null,{}]`, "\xEF\xBB\xBF[]", `[{"class_uid":2004}]   `} {
		f.Add("r.ocsf.json", []byte(s), uint8(0))
	}
	f.Add("report.json", []byte(`[]`), uint8(0))
	f.Add("", []byte("--"+fuzzBoundary+"\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nx\r\n--"+fuzzBoundary+"--\r\n"), uint8(1))
	fake := fakeclient.NewClientBuilder().WithScheme(testenv.Scheme()).Build()
	f.Fuzz(uploadChecker(f, fake))
}

// uploadChecker sets up the upload handler and returns the check of one
// input: the body of FuzzUpload, shared with TestUploadMutations.
func uploadChecker(tb testing.TB, k8s client.Client) func(t *testing.T, name string, content []byte, mode uint8) {
	const limit = 32 << 10
	b := startBare(tb, bareOpts{maxUpload: limit, client: k8s})
	// The server logs to the test by default; inside a fuzz target only t may log.
	b.Server.Log = logr.Discard()
	handler := b.Server.Handler()
	auth := "Api-Key " + b.key

	ctx := context.Background()
	counter := b.Store.(blobCounter)
	blobs := func(t *testing.T) int {
		n, _, err := counter.CountBlobs(ctx, b.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return func(t *testing.T, name string, content []byte, mode uint8) {
		body := content
		if mode%2 == 0 {
			body = fuzzBody(name, content)
		}
		valid, file, records := expectUpload(body, limit)
		before := blobs(t)

		req := httptest.NewRequest(http.MethodPost, "/api/v1/ingestions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+fuzzBoundary)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("%d: %s", rec.Code, rec.Body)
		}
		after := blobs(t)
		if !valid {
			if rec.Code == http.StatusAccepted {
				t.Fatalf("accepted an invalid upload: %s", rec.Body)
			}
			if rec.Code != 400 && rec.Code != 413 {
				t.Fatalf("rejected with %d: %s", rec.Code, rec.Body)
			}
			if after != before {
				t.Fatalf("a rejected upload left %d blobs behind", after-before)
			}
			return
		}
		if rec.Code != http.StatusAccepted {
			t.Fatalf("rejected a valid report of %d records: %d %s", records, rec.Code, rec.Body)
		}
		if after != before+1 {
			t.Fatalf("an accepted upload stored %d blobs", after-before)
		}
		id := strings.TrimPrefix(rec.Header().Get("Location"), "/api/v1/ingestions/")
		var ing posturev1.Ingestion
		if err := b.Client.Get(ctx, keyOf(b.Namespace, id), &ing); err != nil {
			t.Fatalf("accepted, but the Ingestion %q: %v", id, err)
		}
		sum := sha256.Sum256(file)
		up := ing.Spec.Source.Upload
		if ing.Spec.RecordCount != int64(records) || up.Size != int64(len(file)) || up.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("Ingestion spec %+v, want %d records of %d bytes", ing.Spec, records, len(file))
		}
		rc, err := b.Store.OpenBlob(ctx, b.Tenant, up.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(stored, file) {
			t.Fatalf("stored blob differs from the upload (%v)", errors.Join(err))
		}
	}
}

// TestUploadMutations runs the fuzz target's checks over deterministic
// random mutations of a fixture (flipped bytes, truncation, repetition),
// raw and framed, so that plain `go test` exercises them too.
func TestUploadMutations(t *testing.T) {
	check := uploadChecker(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	seed := fixture(t, "aws_3_records.ocsf.json")
	names := []string{"r.ocsf.json", "r.json", "", "a/b.ocsf.json", "x\".ocsf.json"}
	for i := range 300 {
		data := bytes.Clone(seed)
		for range 1 + rng.IntN(3) {
			switch rng.IntN(4) {
			case 0:
				data[rng.IntN(len(data))] = byte(rng.IntN(256))
			case 1:
				data = data[:rng.IntN(len(data))+1]
			case 2:
				data = append(data, data[:rng.IntN(len(data))]...)
			}
		}
		mode := uint8(rng.IntN(2))
		name := names[rng.IntN(len(names))]
		if mode == 1 {
			data = fuzzBody(name, data)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { check(t, name, data, mode) })
	}
}
