package controllers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// smallReport is a real three-record Prowler report: it fits a ConfigMap.
func smallReport(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// reportServer serves body over TLS on 127.0.0.1 and counts the GETs of
// /report.ocsf.json; its CA goes into a Secret for caBundleSecretRef.
type reportServer struct {
	*httptest.Server
	hits atomic.Int32
	body atomic.Pointer[[]byte]
}

func newReportServer(t *testing.T, body []byte) *reportServer {
	t.Helper()
	rs := &reportServer{}
	rs.body.Store(&body)
	mux := http.NewServeMux()
	mux.HandleFunc("/report.ocsf.json", func(w http.ResponseWriter, _ *http.Request) {
		rs.hits.Add(1)
		_, _ = w.Write(*rs.body.Load())
	})
	mux.HandleFunc("/to-http", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+r.Host+"/report.ocsf.json", http.StatusFound)
	})
	mux.HandleFunc("/gone", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no such report", http.StatusNotFound) })
	rs.Server = httptest.NewTLSServer(mux)
	t.Cleanup(rs.Close)
	return rs
}

func (rs *reportServer) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rs.Certificate().Raw})
}

// caSecret stores the server's CA in ns and returns the reference to it.
func (rs *reportServer) caSecret(t *testing.T, ns string) *posturev1.ReportKeyRef {
	t.Helper()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "report-ca", Namespace: ns}, Data: map[string][]byte{"ca.crt": rs.caPEM()}})
	return &posturev1.ReportKeyRef{Name: "report-ca", Key: "ca.crt"}
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// tenantNamespace is a namespace with a Tenant of the same name, whose
// ingestions are stored under that name.
func tenantNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := newNamespace(t, prefix)
	tn := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: posturev1.TenantSpec{Namespace: ns,
		Subscription: posturev1.Subscription{Active: true, Plan: "test", ProviderLimit: 5}}}
	create(t, tn)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), tn) })
	return tn.Name
}

func declaredIngestion(ns, name string, src posturev1.IngestionSource) *posturev1.Ingestion {
	return &posturev1.Ingestion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       posturev1.IngestionSpec{Source: src},
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func findingCount(t *testing.T, st store.Store, tenant string) int {
	t.Helper()
	_, total, err := st.ListFindings(context.Background(), tenant, store.FindingQuery{Page: store.Page{Number: 1, Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// runDeclared runs the in-process manager with declared sources allowed to
// reach the loopback test server, and a short wait for missing objects. It
// returns the manager's reconciler, for a test to reconcile by hand.
func runDeclared(t *testing.T, st store.Store, wait time.Duration) *controllers.IngestionReconciler {
	t.Helper()
	var rec *controllers.IngestionReconciler
	runInProcessWith(t, st, func(r *controllers.IngestionReconciler) {
		r.Sources = sources.Options{AllowLoopback: true, Wait: wait, URLTimeout: 10 * time.Second}
		rec = r
	})
	return rec
}

func TestDeclaredSourceImportsOnce(t *testing.T) {
	st := newStore(t)
	report := smallReport(t)
	srv := newReportServer(t, report)
	rec := runDeclared(t, st, 20*time.Second)

	cases := []struct {
		name string
		// setup creates what the source names and returns the source.
		setup func(t *testing.T, ns string) posturev1.IngestionSource
		// later, when set, runs after the Ingestion exists: GitOps tools
		// may create the ConfigMap after the object that names it.
		later func(t *testing.T, ing *posturev1.Ingestion)
	}{
		{"configMapRef", func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string]string{"report.ocsf.json": string(report)}})
			return posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "report.ocsf.json"}}
		}, nil},
		{"configMapRef binaryData created after the Ingestion", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "late", Key: "report.ocsf.json"}}
		}, func(t *testing.T, ing *posturev1.Ingestion) {
			// Created once the Ingestion waits for it.
			waitFor(t, ing, 10*time.Second, "waiting for its ConfigMap", func(i *posturev1.Ingestion) bool {
				return strings.Contains(i.Status.Message, "Waiting for the report") && strings.Contains(i.Status.Message, "does not exist")
			})
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ing.Namespace}, BinaryData: map[string][]byte{"report.ocsf.json": report}})
		}},
		{"secretRef", func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string][]byte{"scan": report}})
			return posturev1.IngestionSource{SecretRef: &posturev1.ReportKeyRef{Name: "report", Key: "scan"}}
		}, nil},
		{"url with a CA bundle", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: srv.URL + "/report.ocsf.json?sig=secret-token", CABundleSecretRef: srv.caSecret(t, ns)}}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tenantNamespace(t, "declared")
			hitsBefore := srv.hits.Load()
			ing := declaredIngestion(ns, "nightly-scan", tc.setup(t, ns))
			create(t, ing)
			if tc.later != nil {
				tc.later(t, ing)
			}
			got := waitPhase(t, ing, posturev1.IngestionCompleted)
			if got.Status.Summary != (posturev1.IngestionSummary{Total: 3, Processed: 3}) {
				t.Errorf("summary = %+v, want 3/3/0", got.Status.Summary)
			}
			rep := got.Status.Report
			if rep == nil || rep.SHA256 != sha256Hex(report) || rep.Size != int64(len(report)) || rep.RecordCount != 3 || rep.FetchedAt == nil {
				t.Fatalf("status.report = %+v, want the stored copy's size %d, sha256 %s and 3 records", rep, len(report), sha256Hex(report))
			}
			if strings.Contains(got.Status.Message+fmt.Sprint(eventNotes(t, ing)), "secret-token") {
				t.Errorf("the URL's query reached status or events: %q", got.Status.Message)
			}
			if got.Labels[posturev1.LabelTenant] != ns {
				t.Errorf("tenant label = %q, want the namespace's Tenant %s", got.Labels[posturev1.LabelTenant], ns)
			}
			if n := findingCount(t, st, ns); n != 3 {
				t.Errorf("findings = %d, want 3", n)
			}

			// Re-applying the same manifest changes nothing, and a metadata
			// edit (a GitOps tool's label) neither: no second fetch, no new run.
			hits := srv.hits.Load()
			cur := got.DeepCopy()
			cur.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "posture"}
			if err := k8s.Update(context.Background(), cur); err != nil {
				t.Fatal(err)
			}
			if cur.Generation != got.Generation {
				t.Fatalf("a label edit moved the generation from %d to %d", got.Generation, cur.Generation)
			}
			// A changed source is refused: a new report is a new Ingestion.
			changed := cur.DeepCopy()
			changed.Spec.Source = posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "other", Key: "r.json"}}
			if err := k8s.Update(context.Background(), changed); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
				t.Errorf("changing spec.source: err = %v, want spec is immutable", err)
			}
			// A reconcile after the label edit leaves the ingestion as it was.
			reconcileSeen(t, rec, ing, func(i *posturev1.Ingestion) bool {
				return i.Labels["kustomize.toolkit.fluxcd.io/name"] == "posture"
			})
			again := waitPhase(t, ing, posturev1.IngestionCompleted)
			if again.Status.Attempt != 1 || !again.Status.CompletedAt.Equal(got.Status.CompletedAt) {
				t.Errorf("after re-apply: attempt %d completedAt %v, want the first run's (1, %v)", again.Status.Attempt, again.Status.CompletedAt, got.Status.CompletedAt)
			}
			if srv.hits.Load() != hits {
				t.Errorf("the URL was fetched again after re-apply (%d GETs, want %d)", srv.hits.Load(), hits)
			}
			// The report is read once, and again only when the status
			// write that records its stored copy lost a race with another
			// writer of the Ingestion: that copy is dropped and the next
			// reconcile reads the source again (fetch). Never more, and
			// never once the run has used a copy (checked above).
			if tc.name == "url with a CA bundle" && (hits-hitsBefore < 1 || hits-hitsBefore > 2) {
				t.Errorf("the URL was fetched %d times, want once (twice if the first copy could not be recorded)", hits-hitsBefore)
			}
			if n := findingCount(t, st, ns); n != 3 {
				t.Errorf("findings after re-apply = %d, want 3", n)
			}
			if reasons := strings.Join(eventReasons(t, ing, 4), ","); reasons != "Pending,Fetched,Processing,Completed" {
				t.Errorf("events = %s, want Pending,Fetched,Processing,Completed", reasons)
			}
		})
	}
}

// eventNotes lists the notes of the events about an object.
func eventNotes(t *testing.T, o client.Object) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(o.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == o.GetName() {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

func TestDeclaredSourceFailures(t *testing.T) {
	st := newStore(t)
	report := smallReport(t)
	srv := newReportServer(t, report)
	many := newReportServer(t, testenv.AccountsReport(t, testenv.DistinctAccounts(billing.MaxAccounts+1)...))
	runDeclared(t, st, 2*time.Second)

	cases := []struct {
		name     string
		source   func(t *testing.T, ns string) posturev1.IngestionSource
		wantCode string
		wantMsg  string
	}{
		{"redirect to http", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: srv.URL + "/to-http", CABundleSecretRef: srv.caSecret(t, ns)}}
		}, ingest.CodeUnreadable, "redirected to http URL http://127.0.0.1"},
		{"larger than maxBytes", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: srv.URL + "/report.ocsf.json", CABundleSecretRef: srv.caSecret(t, ns), MaxBytes: ptr.To[int64](1000)}}
		}, sources.CodeTooLarge, "larger than the limit of 1000 bytes"},
		{"server not trusted", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: srv.URL + "/report.ocsf.json"}}
		}, ingest.CodeUnreadable, "certificate is not trusted"},
		{"404", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: srv.URL + "/gone", CABundleSecretRef: srv.caSecret(t, ns)}}
		}, ingest.CodeUnreadable, "answered 404 Not Found"},
		{"more accounts than a report may name", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: many.URL + "/report.ocsf.json", CABundleSecretRef: many.caSecret(t, ns)}}
		}, ingest.CodeProviderLimit, fmt.Sprintf("names too many accounts: record %d names account number %d; a report may name at most %d", billing.MaxAccounts, billing.MaxAccounts+1, billing.MaxAccounts)},
		{"malformed report in a ConfigMap", func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}, Data: map[string]string{"r": `{"not": "an array"}`}})
			return posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "bad", Key: "r"}}
		}, ingest.CodeMalformed, "ConfigMap bad key r is not a valid OCSF report"},
		{"ConfigMap never created", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "missing", Key: "r"}}
		}, ingest.CodeUnreadable, "does not exist (gave up 2s after the Ingestion was created)"},
		{"Secret without the key", func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string][]byte{"other": report}})
			return posturev1.IngestionSource{SecretRef: &posturev1.ReportKeyRef{Name: "report", Key: "scan"}}
		}, ingest.CodeUnreadable, "has no key scan"},
		{"namespace without a Tenant", func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string]string{"r": string(report)}})
			return posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r"}}
		}, ingest.CodeUnreadable, "no Tenant uses namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tenantNamespace(t, "declared-bad")
			if tc.name == "namespace without a Tenant" {
				ns = newNamespace(t, "declared-bad")
			}
			ing := declaredIngestion(ns, "scan", tc.source(t, ns))
			create(t, ing)
			got := waitPhase(t, ing, posturev1.IngestionFailed)
			if !strings.Contains(got.Status.Message, tc.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", got.Status.Message, tc.wantMsg)
			}
			errs, _, err := st.ListIngestionErrors(context.Background(), ns, ing.Name, store.Page{Number: 1, Size: 10})
			if err != nil || len(errs) != 1 || errs[0].Code != tc.wantCode || errs[0].RecordIndex != nil {
				t.Errorf("error rows = %+v (err %v), want one ingestion-level %s", errs, err, tc.wantCode)
			}
			if got.Status.Report != nil {
				t.Errorf("status.report = %+v, want none: nothing was stored", got.Status.Report)
			}
			if n := findingCount(t, st, ns); n != 0 {
				t.Errorf("findings = %d, want none", n)
			}
		})
	}
}

// TestDeclaredSourceNeverQuotesItsContent: a Secret or URL that is not a
// report fails its Ingestion with the position and the kind of problem, and
// never a byte of what it holds: view reads an Ingestion's status, events and
// errors, but not Secrets, nor what the manager fetched from a URL. A
// ConfigMap's problem still names the character, since view reads the
// ConfigMap itself.
func TestDeclaredSourceNeverQuotesItsContent(t *testing.T) {
	st := newStore(t)
	pw := newReportServer(t, []byte("password1"))
	runDeclared(t, st, 2*time.Second)
	secret := func(content string) func(t *testing.T, ns string) posturev1.IngestionSource {
		return func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Data: map[string][]byte{"password": []byte(content)}})
			return posturev1.IngestionSource{SecretRef: &posturev1.ReportKeyRef{Name: "db", Key: "password"}}
		}
	}
	cases := []struct {
		name   string
		source func(t *testing.T, ns string) posturev1.IngestionSource
		want   string
		quoted bool // whether the message may quote the content
	}{
		{"a Secret holding a password", secret("password1"),
			"Secret db key password is not a valid OCSF report: expected a JSON array at byte 0", false},
		{"a Secret holding an array of tokens", secret("[1, s3cr3t]"),
			"Secret db key password is not a valid OCSF report: malformed JSON at byte 4: unexpected character looking for beginning of value", false},
		{"a Secret holding what starts as a literal", secret("[tXue]"),
			"malformed JSON at byte 2: unexpected character in a literal (true, false or null)", false},
		{"a URL answering a password", func(t *testing.T, ns string) posturev1.IngestionSource {
			return posturev1.IngestionSource{URL: &posturev1.URLSource{URL: pw.URL + "/report.ocsf.json", CABundleSecretRef: pw.caSecret(t, ns)}}
		}, "/report.ocsf.json is not a valid OCSF report: expected a JSON array at byte 0", false},
		{"a ConfigMap names the character", func(t *testing.T, ns string) posturev1.IngestionSource {
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "notes", Namespace: ns}, Data: map[string]string{"r": "password1"}})
			return posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "notes", Key: "r"}}
		}, "ConfigMap notes key r is not a valid OCSF report: expected a JSON array at byte 0, found invalid character 'p'", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tenantNamespace(t, "declared-quote")
			ing := declaredIngestion(ns, "scan", tc.source(t, ns))
			create(t, ing)
			got := waitPhase(t, ing, posturev1.IngestionFailed)
			if !strings.Contains(got.Status.Message, tc.want) {
				t.Errorf("message = %q, want it to contain %q", got.Status.Message, tc.want)
			}
			errs, _, err := st.ListIngestionErrors(context.Background(), ns, ing.Name, store.Page{Number: 1, Size: 10})
			if err != nil || len(errs) != 1 || !strings.Contains(errs[0].Detail, tc.want) {
				t.Fatalf("error rows = %+v (err %v), want one saying %q", errs, err, tc.want)
			}
			var notes []string
			testenv.Eventually(t, 10*time.Second, "the failure's event", func() (bool, string) {
				notes = eventNotes(t, ing)
				return strings.Contains(strings.Join(notes, "\n"), tc.want), strings.Join(notes, "\n")
			})
			if tc.quoted {
				return
			}
			for _, text := range append([]string{got.Status.Message, errs[0].Detail, errs[0].Value}, notes...) {
				for _, leak := range []string{"'p'", "'s'", "'X'", "'t'", "invalid character", "found", "password1", "s3cr3t", "literal true"} {
					if strings.Contains(text, leak) {
						t.Errorf("%q quotes the content (%s)", text, leak)
					}
				}
			}
		})
	}
}

// TestURLSourceRefusesInternalAddresses runs the manager as shipped: loopback
// and link-local addresses are not fetched.
func TestURLSourceRefusesInternalAddresses(t *testing.T) {
	st := newStore(t)
	srv := newReportServer(t, smallReport(t))
	runInProcessWith(t, st, func(r *controllers.IngestionReconciler) {
		r.Sources = sources.Options{Wait: time.Second}
	})
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	cases := []struct{ name, url, want string }{
		{"loopback", srv.URL + "/report.ocsf.json", "address 127.0.0.1 is loopback"},
		{"instance metadata", "https://169.254.169.254:" + port + "/latest/meta-data", "address 169.254.169.254 is link-local"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tenantNamespace(t, "ssrf")
			ing := declaredIngestion(ns, "scan", posturev1.IngestionSource{URL: &posturev1.URLSource{URL: tc.url, CABundleSecretRef: srv.caSecret(t, ns)}})
			create(t, ing)
			got := waitPhase(t, ing, posturev1.IngestionFailed)
			if !strings.Contains(got.Status.Message, tc.want) {
				t.Errorf("message = %q, want it to contain %q", got.Status.Message, tc.want)
			}
		})
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
}

// TestDeclaredSourceChangedDigest: the copy of a report read before is lost
// before any run used it (a crash, a store restored from a backup), so the
// manager reads the source again. Different content is an error, never a
// second, different import under the same object.
func TestDeclaredSourceChangedDigest(t *testing.T) {
	st := newStore(t)
	report := smallReport(t)
	srv := newReportServer(t, report)
	cases := []struct {
		name     string
		recorded string
		want     posturev1.IngestionPhase
	}{
		{"same content", sha256Hex(report), posturev1.IngestionCompleted},
		{"changed content", strings.Repeat("0", 64), posturev1.IngestionFailed},
	}
	ings := make([]*posturev1.Ingestion, len(cases))
	for i, tc := range cases {
		ns := tenantNamespace(t, "digest")
		ing := declaredIngestion(ns, "scan", posturev1.IngestionSource{URL: &posturev1.URLSource{URL: srv.URL + "/report.ocsf.json", CABundleSecretRef: srv.caSecret(t, ns)}})
		create(t, ing)
		// What a manager that stopped after recording the first fetch left.
		ing.Status = posturev1.IngestionStatus{Phase: posturev1.IngestionPending, Summary: posturev1.IngestionSummary{Total: 3},
			Report: &posturev1.FetchedReport{BlobID: "lost-copy", Size: int64(len(report)), SHA256: tc.recorded, RecordCount: 3}}
		if err := k8s.Status().Update(context.Background(), ing); err != nil {
			t.Fatal(err)
		}
		ings[i] = ing
	}
	runDeclared(t, st, 10*time.Second)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := waitPhase(t, ings[i], tc.want)
			if srv.hits.Load() == 0 {
				t.Error("the source was not read again")
			}
			switch tc.want {
			case posturev1.IngestionFailed:
				want := "changed since it was first read: sha256 " + tc.recorded + " then, " + sha256Hex(report) + " now"
				if !strings.Contains(got.Status.Message, want) {
					t.Errorf("message = %q, want it to contain %q", got.Status.Message, want)
				}
				errs, _, _ := st.ListIngestionErrors(context.Background(), ings[i].Namespace, ings[i].Name, store.Page{Number: 1, Size: 10})
				if len(errs) != 1 || errs[0].Code != controllers.CodeReportChanged {
					t.Errorf("error rows = %+v, want one %s", errs, controllers.CodeReportChanged)
				}
				if n := findingCount(t, st, ings[i].Namespace); n != 0 {
					t.Errorf("findings = %d, want none", n)
				}
				if got.Status.Report.SHA256 != tc.recorded {
					t.Errorf("status.report.sha256 = %s, want the first digest kept", got.Status.Report.SHA256)
				}
			default:
				if n := findingCount(t, st, ings[i].Namespace); n != 3 {
					t.Errorf("findings = %d, want 3", n)
				}
			}
		})
	}
}

func TestIngestionSourceValidation(t *testing.T) {
	ns := newNamespace(t, "declared-crd")
	ref := &posturev1.ReportKeyRef{Name: "r", Key: "k"}
	cases := []struct {
		name   string
		source posturev1.IngestionSource
		want   string // empty: accepted
	}{
		{"configMapRef", posturev1.IngestionSource{ConfigMapRef: ref}, ""},
		{"https url", posturev1.IngestionSource{URL: &posturev1.URLSource{URL: "https://reports.example/r.json"}}, ""},
		{"none", posturev1.IngestionSource{}, "exactly one of upload, configMapRef, secretRef or url"},
		{"two", posturev1.IngestionSource{ConfigMapRef: ref, SecretRef: ref}, "exactly one of upload, configMapRef, secretRef or url"},
		{"http url", posturev1.IngestionSource{URL: &posturev1.URLSource{URL: "http://reports.example/r.json"}}, "spec.source.url.url must start with https://"},
		{"maxBytes above 1 GiB", posturev1.IngestionSource{URL: &posturev1.URLSource{URL: "https://reports.example/r.json", MaxBytes: ptr.To[int64](2 << 30)}}, "spec.source.url.maxBytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing := declaredIngestion(ns, "", tc.source)
			ing.GenerateName = "v-"
			err := k8s.Create(context.Background(), ing, client.DryRunAll)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestIngestionTenantLabelCannotNameAnotherTenant: the tenant label of an
// Ingestion decides under which tenant its report, run, error rows and
// findings are stored, and whoever may create Ingestions in a namespace can
// write it. One naming another tenant than the namespace's must neither
// import into that tenant nor touch that tenant's runs, also when deleted.
func TestIngestionTenantLabelCannotNameAnotherTenant(t *testing.T) {
	st := newStore(t)
	report := smallReport(t)
	rec := runDeclared(t, st, 20*time.Second)
	ctx := context.Background()

	victim := tenantNamespace(t, "victim")
	attacker := tenantNamespace(t, "attacker")

	// The victim's own declared ingestion, named as a GitOps repository would.
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: victim}, Data: map[string]string{"r.ocsf.json": string(report)}})
	own := declaredIngestion(victim, "nightly", posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r.ocsf.json"}})
	create(t, own)
	waitPhase(t, own, posturev1.IngestionCompleted)
	if n := findingCount(t, st, victim); n != 3 {
		t.Fatalf("victim findings = %d, want 3", n)
	}

	// The attacker's Ingestions, in its own namespace, from a ConfigMap it
	// may read, labelled with the victim's tenant: one injecting findings of
	// its own making, one named like the victim's.
	forged := strings.ReplaceAll(string(report), "prowler-aws-", "forged-aws-")
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: attacker}, Data: map[string]string{"r.ocsf.json": forged}})
	var refused []*posturev1.Ingestion
	for _, name := range []string{"inject", "nightly"} {
		ing := declaredIngestion(attacker, name, posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r.ocsf.json"}})
		ing.Labels = map[string]string{posturev1.LabelTenant: victim}
		create(t, ing)
		got := waitPhase(t, ing, posturev1.IngestionFailed)
		if !strings.Contains(got.Status.Message, "names another tenant") {
			t.Errorf("%s: status message = %q, want it to say the label names another tenant", name, got.Status.Message)
		}
		refused = append(refused, got)
	}
	// In a namespace no Tenant uses, a label naming the victim is refused too.
	tenantless := newNamespace(t, "tenantless")
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: tenantless}, Data: map[string]string{"r.ocsf.json": forged}})
	stray := declaredIngestion(tenantless, "nightly", posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r.ocsf.json"}})
	stray.Labels = map[string]string{posturev1.LabelTenant: victim}
	create(t, stray)
	if got := waitPhase(t, stray, posturev1.IngestionFailed); !strings.Contains(got.Status.Message, "does not use namespace") {
		t.Errorf("tenantless: status message = %q, want it to say the tenant does not use the namespace", got.Status.Message)
	}
	refused = append(refused, stray)
	// The reconciles after the refusal touch nothing either.
	for _, ing := range refused {
		reconcileSeen(t, rec, ing, func(i *posturev1.Ingestion) bool { return i.Status.Phase == posturev1.IngestionFailed })
	}
	if n := findingCount(t, st, victim); n != 3 {
		t.Errorf("victim findings = %d after the forged Ingestions, want still 3", n)
	}
	if _, err := st.GetRun(ctx, victim, "inject"); err == nil {
		t.Errorf("a run of the forged Ingestion was stored under the victim's tenant")
	}
	run, err := st.GetRun(ctx, victim, "nightly")
	if err != nil || run.Status != store.RunSucceeded || run.Processed != 3 || run.Attempt != 1 {
		t.Errorf("the victim's run was touched: %+v (%v)", run, err)
	}
	if rows, _, err := st.ListIngestionErrors(ctx, victim, "nightly", store.Page{Number: 1, Size: 10}); err != nil || len(rows) != 0 {
		t.Errorf("the victim's error rows = %v (%v), want none", rows, err)
	}

	// Deleting them leaves the victim's run.
	for _, ing := range refused {
		if err := k8s.Delete(ctx, ing); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ing, 20*time.Second)
	}
	if _, err := st.GetRun(ctx, victim, "nightly"); err != nil {
		t.Errorf("the victim's run after deleting the forged Ingestions: %v", err)
	}
}

// slowServer answers every GET with the start of a report and then holds the
// body back until release is closed, counting the reads it serves at once.
type slowServer struct {
	*httptest.Server
	release        chan struct{}
	inFlight, peak atomic.Int32
	served         atomic.Int32
}

func newSlowServer(t *testing.T) *slowServer {
	t.Helper()
	s := &slowServer{release: make(chan struct{})}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			p := s.peak.Load()
			if n <= p || s.peak.CompareAndSwap(p, n) {
				break
			}
		}
		s.served.Add(1)
		_, _ = w.Write([]byte("["))
		w.(http.Flusher).Flush()
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(s.release)
		s.Close()
	})
	return s
}

// TestSlowURLSourcesHoldNoOtherTenant: url sources are read outside the
// reconcile, a few per tenant at a time. Five url Ingestions of one tenant
// whose server sends their body ever so slowly used to hold every worker of
// the Ingestion controller for the URL timeout, and another tenant's upload
// waited that long; now it completes at once, and the slow tenant's server
// sees no more than its tenant's share of reads at a time.
func TestSlowURLSourcesHoldNoOtherTenant(t *testing.T) {
	st := newStore(t)
	slow := newSlowServer(t)
	runInProcessWith(t, st, func(r *controllers.IngestionReconciler) {
		r.Sources = sources.Options{AllowLoopback: true, Wait: time.Minute, URLTimeout: 40 * time.Second, URLFetchesPerTenant: 2}
	})
	slowNS := tenantNamespace(t, "slow-sources")
	ca := (&reportServer{Server: slow.Server}).caSecret(t, slowNS)
	var hanging []*posturev1.Ingestion
	for i := range 5 {
		ing := declaredIngestion(slowNS, fmt.Sprintf("slow-%d", i), posturev1.IngestionSource{URL: &posturev1.URLSource{URL: slow.URL + "/report.ocsf.json", CABundleSecretRef: ca}})
		create(t, ing)
		hanging = append(hanging, ing)
	}
	testenv.Eventually(t, 10*time.Second, "the slow server to be read", func() (bool, string) {
		return slow.inFlight.Load() >= 2, fmt.Sprintf("%d reads in flight", slow.inFlight.Load())
	})
	for _, ing := range hanging {
		waitFor(t, ing, 10*time.Second, "the pending status of a URL being read", func(i *posturev1.Ingestion) bool {
			return i.Status.Phase == posturev1.IngestionPending
		})
	}

	otherNS := tenantNamespace(t, "other-tenant")
	start := time.Now()
	ing := upload(t, st, otherNS, otherNS, testenv.Fixture("aws_3_records.ocsf.json"))
	waitFor(t, ing, 30*time.Second, "the other tenant's upload to complete", func(i *posturev1.Ingestion) bool {
		return i.Status.Phase == posturev1.IngestionCompleted
	})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("another tenant's 3-record upload took %v while slow URL sources were read", took)
	}
	if peak := slow.peak.Load(); peak > 2 {
		t.Errorf("the slow tenant's server served %d reads at once, want at most 2 (URLFetchesPerTenant)", peak)
	}
	for _, ing := range hanging {
		var got posturev1.Ingestion
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ing), &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != posturev1.IngestionPending {
			t.Errorf("%s is %s (%s) while its URL is still being read, want pending", ing.Name, got.Status.Phase, got.Status.Message)
		}
	}
}
