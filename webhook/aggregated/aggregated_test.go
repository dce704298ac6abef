package aggregated_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook/aggregated"
)

// route is the package's one path from kube-apiserver to a local
// aggregated server: every request in these tests goes through the real
// kube-aggregator, its authentication and its RBAC.
var route *testenv.AggregatorRoute

func TestMain(m *testing.M) {
	var err error
	route, err = testenv.NewAggregatorRoute("", "posture-system")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	apitest.MainWith(m, route.Option())
}

// kubectl runs the real kubectl against the test control plane.
type kubectl struct {
	t          *testing.T
	kubeconfig string
}

type result struct {
	err            error
	stdout, stderr string
}

func (k kubectl) run(stdin io.Reader, args ...string) result {
	k.t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{err: err, stdout: out.String(), stderr: errb.String()}
}

func (k kubectl) ok(args ...string) string {
	k.t.Helper()
	r := k.run(nil, args...)
	if r.err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

func adminKubeconfig(t *testing.T) string {
	t.Helper()
	return testenv.Kubeconfig(t, apitest.RESTConfig(), "admin")
}

// newTenant creates a namespace and the Tenant that owns it.
func newTenant(t *testing.T, c client.Client, active bool) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	tenant := &posturev1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: ns.Name},
		Spec: posturev1.TenantSpec{Namespace: ns.Name, Subscription: posturev1.Subscription{Active: active}}}
	if err := c.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func bindUser(t *testing.T, c client.Client, ns, user, clusterRole string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + clusterRole, Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
	}
	if err := c.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

func uploadPath(ns, filename string) string {
	p := "/apis/data.posture.dev/v1alpha1/namespaces/" + ns + "/uploads"
	if filename != "" {
		p += "?filename=" + filename
	}
	return p
}

// waitCompleted waits for an Ingestion to end and fails unless it completed.
func waitCompleted(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	var ing posturev1.Ingestion
	testenv.Eventually(t, 2*time.Minute, "ingestion "+name+" to end", func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ing)
		return err == nil && ing.Status.Phase.Terminal(), fmt.Sprintf("phase %q (err %v)", ing.Status.Phase, err)
	})
	if ing.Status.Phase != posturev1.IngestionCompleted {
		t.Fatalf("ingestion %s ended %s: %s", name, ing.Status.Phase, ing.Status.Message)
	}
}

// TestThroughKubeAggregator runs the aggregated API behind the real
// kube-apiserver and drives it with the real kubectl. One backend serves
// every subtest: kube-aggregator judges availability on its own schedule,
// so the backend is not restarted between them.
// startAggregated starts the API with the aggregated API server beside it
// (on PostgreSQL or SQLite, refusing uploads over maxUpload bytes),
// registered through kube-apiserver's aggregator and Available, and an
// admin client of the control plane.
func startAggregated(t *testing.T, postgres bool, maxUpload int64) (*apitest.Env, client.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	route.SetBackend(ln.Addr().String())
	env := apitest.Start(t, apitest.Options{
		Postgres: postgres,
		Billing:  &posturev1.Subscription{Active: true},
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			srv, err := aggregated.New(aggregated.Options{
				Listener: ln, CertDir: route.ServingCertDir, RESTConfig: apitest.RESTConfig(),
				Client: mgr.GetClient(), Store: st, Log: ctrl.Log.WithName("aggregated"), MaxUploadBytes: maxUpload,
			})
			if err != nil {
				return err
			}
			// MuteRules mark findings, which every door then shows.
			if err := (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(context.Background(), mgr); err != nil {
				return err
			}
			return mgr.Add(srv)
		},
	})
	admin, err := client.New(apitest.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := testenv.ApplyFile(ctx, admin, "config/rbac/aggregated_api_roles.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := route.Register(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitAvailable(ctx, admin); err != nil {
		t.Fatal(err)
	}
	return env, admin
}

func TestThroughKubeAggregator(t *testing.T) {
	// Above the 1,500-record report (3.3 MB), below what the 413 subtest
	// sends.
	env, admin := startAggregated(t, false, 4<<20)
	k := kubectl{t: t, kubeconfig: adminKubeconfig(t)}
	ns := env.Namespace

	t.Run("upload of the 1,500-record report completes", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		out := k.ok("create", "--raw", uploadPath(ns, "aws_1500_records.ocsf.json"), "-f", testenv.Fixture("aws_1500_records.ocsf.json"))
		var ing posturev1.Ingestion
		if err := json.Unmarshal([]byte(out), &ing); err != nil {
			t.Fatalf("the answer is not an Ingestion: %v\n%s", err, out)
		}
		if ing.Kind != "Ingestion" || ing.APIVersion != "posture.dev/v1alpha1" || ing.Status.Phase != posturev1.IngestionPending {
			t.Errorf("answer is %s %s phase %q, want posture.dev/v1alpha1 Ingestion pending", ing.APIVersion, ing.Kind, ing.Status.Phase)
		}
		// The same summary as REST's 202: the records counted at upload.
		if s := ing.Status.Summary; s.Total != 1500 || s.Processed != 0 || s.Invalid != 0 {
			t.Errorf("status.summary %+v, want total 1500, processed 0, invalid 0 as POST /api/v1/ingestions answers", s)
		}
		if ing.Spec.RecordCount != 1500 || ing.Spec.Source.Upload.Filename != "aws_1500_records.ocsf.json" {
			t.Errorf("recordCount %d file %q, want 1500 aws_1500_records.ocsf.json", ing.Spec.RecordCount, ing.Spec.Source.Upload.Filename)
		}
		waitCompleted(t, admin, ns, ing.Name)
	})
	total := countFindings(t, env.Store, env.Tenant, store.FindingQuery{})
	if total == 0 {
		t.Fatal("no findings stored; the upload subtest failed")
	}

	t.Run("kubectl get findings prints the table columns and every finding", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		lines := strings.Split(strings.TrimSpace(k.ok("get", "findings", "-n", ns)), "\n")
		header := strings.Fields(lines[0])
		want := []string{"NAME", "SEVERITY", "STATUS", "CODE", "CHECK", "RESOURCE", "PROVIDER", "DELTA", "FIRST", "SEEN", "MUTED", "AGE"}
		if !slices.Equal(header, want) {
			t.Errorf("header %q, want %q", header, want)
		}
		if len(lines)-1 != total {
			t.Errorf("kubectl get findings printed %d rows, the store holds %d", len(lines)-1, total)
		}
	})

	t.Run("chunked lists page through the store's cursor", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		names := strings.Fields(k.ok("get", "findings", "-n", ns, "--chunk-size=97", "-o", "name"))
		seen := map[string]bool{}
		for _, n := range names {
			seen[n] = true
		}
		if len(names) != total || len(seen) != total {
			t.Errorf("--chunk-size=97 listed %d names (%d distinct), want %d", len(names), len(seen), total)
		}
		var page struct {
			Metadata struct{ Continue string } `json:"metadata"`
			Items    []struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"items"`
		}
		base := "/apis/data.posture.dev/v1alpha1/namespaces/" + ns + "/findings?limit=10"
		if err := json.Unmarshal([]byte(k.ok("get", "--raw", base)), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 10 || page.Metadata.Continue == "" {
			t.Fatalf("limit=10 gave %d items and continue %q; want 10 and a token", len(page.Items), page.Metadata.Continue)
		}
		first := page.Items[0].Metadata.Name
		if err := json.Unmarshal([]byte(k.ok("get", "--raw", base+"&continue="+page.Metadata.Continue)), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 10 || page.Items[0].Metadata.Name == first {
			t.Errorf("the second page repeats the first or is short: %d items", len(page.Items))
		}
		r := k.run(nil, "get", "--raw", base+"&continue="+page.Metadata.Continue+"&fieldSelector=severity%3Dhigh")
		if r.err == nil || !strings.Contains(r.stderr, "continue token") {
			t.Errorf("a continue token reused with another selector was not refused: %v %s", r.err, r.stderr)
		}
	})

	t.Run("field selectors", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		var any store.Finding
		rows, _, err := env.Store.ListFindings(context.Background(), env.Tenant, store.FindingQuery{Page: store.Page{Number: 1, Size: 1}})
		if err != nil || len(rows) == 0 {
			t.Fatal(err)
		}
		any = rows[0]
		for _, tc := range []struct {
			selector string
			query    store.FindingQuery
		}{
			{"severity=" + any.Severity, store.FindingQuery{Severity: []string{any.Severity}}},
			{"statusCode=" + any.StatusCode, store.FindingQuery{StatusCode: []string{any.StatusCode}}},
			{"checkID=" + any.CheckID, store.FindingQuery{CheckID: any.CheckID}},
			{"providerUID=" + any.ProviderUID, store.FindingQuery{ProviderUID: any.ProviderUID}},
			{"scan=" + any.ScanID, store.FindingQuery{ScanID: any.ScanID}},
			{"ingestion=" + any.IngestionID, store.FindingQuery{IngestionID: any.IngestionID}},
			{"checkID=" + any.CheckID + ",statusCode=" + any.StatusCode, store.FindingQuery{CheckID: any.CheckID, StatusCode: []string{any.StatusCode}}},
			{"metadata.name=" + any.ID, store.FindingQuery{}},
		} {
			t.Run(tc.selector, func(t *testing.T) {
				names := strings.Fields(k.ok("get", "findings", "-n", ns, "--field-selector", tc.selector, "-o", "name"))
				want := countFindings(t, env.Store, env.Tenant, tc.query)
				if strings.HasPrefix(tc.selector, "metadata.name") {
					want = 1
				}
				if len(names) != want || want == 0 {
					t.Errorf("--field-selector %s listed %d findings, the store has %d", tc.selector, len(names), want)
				}
			})
		}
		r := k.run(nil, "get", "findings", "-n", ns, "--field-selector", "region=eu-west-1")
		if r.err == nil || !strings.Contains(r.stderr, `field selector region is not supported for Finding; supported: metadata.name, metadata.namespace, severity, statusCode, providerUID, checkID, scan, ingestion, latest`) {
			t.Errorf("an unsupported selector was not refused by name: %v %s", r.err, r.stderr)
		}
	})

	t.Run("latest=true lists the current state beside the history", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		// A second, smaller report of the same account makes the current
		// state (its scan) differ from the history (both scans).
		out := k.ok("create", "--raw", uploadPath(ns, "again.ocsf.json"), "-f", testenv.Fixture("aws_3_records.ocsf.json"))
		var ing posturev1.Ingestion
		if err := json.Unmarshal([]byte(out), &ing); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, admin, ns, ing.Name)
		history := countFindings(t, env.Store, env.Tenant, store.FindingQuery{})
		for _, tc := range []struct {
			selector string
			query    store.FindingQuery
		}{
			{"latest=true", store.FindingQuery{Latest: true}},
			{"latest=false", store.FindingQuery{}},
			{"latest=true,statusCode=FAIL", store.FindingQuery{Latest: true, StatusCode: []string{"FAIL"}}},
		} {
			want := countFindings(t, env.Store, env.Tenant, tc.query)
			names := strings.Fields(k.ok("get", "findings", "-n", ns, "--field-selector", tc.selector, "--chunk-size=7", "-o", "name"))
			if len(names) != want || want == 0 {
				t.Errorf("--field-selector %s listed %d findings, the store has %d", tc.selector, len(names), want)
			}
		}
		if latest := countFindings(t, env.Store, env.Tenant, store.FindingQuery{Latest: true}); latest == history {
			t.Errorf("the current state holds all %d findings of the history: the test proves nothing", history)
		}
		for _, tc := range []struct{ selector, want string }{
			{"latest=yes", "field selector latest=yes: want latest=true (the current state) or latest=false (the whole history)"},
			{"latest=true,metadata.name=x", "field selector metadata.name cannot be combined with latest=true"},
		} {
			if r := k.run(nil, "get", "findings", "-n", ns, "--field-selector", tc.selector); r.err == nil || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("--field-selector %s: %v %s, want refused with %q", tc.selector, r.err, r.stderr, tc.want)
			}
		}
	})

	t.Run("scans and ingestion errors", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		scans := strings.Fields(k.ok("get", "scans", "-n", ns, "-o", "name"))
		if len(scans) == 0 {
			t.Fatal("no scans listed")
		}
		k.ok("get", scans[0], "-n", ns)
		r := k.run(nil, "get", "ingestionerrors", "-n", ns)
		if r.err == nil || !strings.Contains(r.stderr, "--field-selector ingestion=") {
			t.Errorf("ingestion errors listed without an ingestion: %v %s", r.err, r.stderr)
		}
		// The mixed example has 4 invalid records of 7 (examples/README.md).
		out := k.ok("create", "--raw", uploadPath(ns, "aws_mixed_7_records.ocsf.json"), "-f", filepath.Join(testenv.Root(), "examples", "aws_mixed_7_records.ocsf.json"))
		var ing posturev1.Ingestion
		if err := json.Unmarshal([]byte(out), &ing); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, admin, ns, ing.Name)
		// The ingestion field selector lists the scans that ingestion last
		// wrote, not every scan of the tenant.
		all, _, err := env.Store.ListScans(context.Background(), env.Tenant, store.ScanQuery{Page: store.Page{Number: 1, Size: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, sc := range all {
			if sc.IngestionID == ing.Name {
				want = append(want, "scan.data.posture.dev/"+sc.ID)
			}
		}
		if len(want) == 0 || len(want) == len(all) {
			t.Fatalf("the mixed example wrote %d of the tenant's %d scans; the check needs some, not all", len(want), len(all))
		}
		got := strings.Fields(k.ok("get", "scans", "-n", ns, "--field-selector", "ingestion="+ing.Name, "-o", "name"))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("--field-selector ingestion=%s listed scans %q, want %q", ing.Name, got, want)
		}
		errs := strings.Fields(k.ok("get", "ingestionerrors", "-n", ns, "--field-selector", "ingestion="+ing.Name, "--chunk-size=3", "-o", "name"))
		if len(errs) != 4 {
			t.Fatalf("the mixed example lists %d ingestion errors, want 4: %q", len(errs), errs)
		}
		table := k.ok("get", errs[0], "-n", ns)
		if !strings.Contains(table, "RECORD") || !strings.Contains(table, "CODE") {
			t.Errorf("kubectl get %s:\n%s", errs[0], table)
		}
		// The errors of an ingestion the namespace does not hold are a 404,
		// as GET /api/v1/ingestions/{id}/errors answers, never an empty list.
		if r := k.run(nil, "get", "ingestionerrors", "-n", ns, "--field-selector", "ingestion="+ing.Name+"x"); r.err == nil ||
			!strings.Contains(r.stderr, `ingestions.posture.dev "`+ing.Name+`x" not found`) {
			t.Errorf("ingestion errors of an unknown ingestion: %v\n%s%s", r.err, r.stdout, r.stderr)
		}

		// A declared Ingestion's name may hold dots; the names of its
		// errors (<ingestion>.<row>) still resolve.
		report, err := os.ReadFile(filepath.Join(testenv.Root(), "examples", "aws_mixed_7_records.ocsf.json"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mixed-report", Namespace: ns},
			Data: map[string]string{"r.ocsf.json": string(report)}}); err != nil {
			t.Fatal(err)
		}
		dotted := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "nightly.2026-11-27", Namespace: ns},
			Spec: posturev1.IngestionSpec{Source: posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "mixed-report", Key: "r.ocsf.json"}}}}
		if err := admin.Create(ctx, dotted); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, admin, ns, dotted.Name)
		errs = strings.Fields(k.ok("get", "ingestionerrors", "-n", ns, "--field-selector", "ingestion="+dotted.Name, "-o", "name"))
		if len(errs) != 4 {
			t.Fatalf("ingestion %s lists %d ingestion errors, want 4: %q", dotted.Name, len(errs), errs)
		}
		if r := k.run(nil, "get", errs[0], "-n", ns, "-o", "yaml"); r.err != nil || !strings.Contains(r.stdout, "ingestion: "+dotted.Name) {
			t.Errorf("kubectl get %s: %v\n%s%s", errs[0], r.err, r.stdout, r.stderr)
		}

		// A scan says through kubectl what the REST API says of it: when
		// the scanner ran, what failed, and the report that last wrote it,
		// uploaded (with its file name) or declared (without one).
		var uploaded, declared *datav1.Scan
		failed := false
		for _, sc := range scansAgree(t, k, env, ns) {
			switch {
			case sc.Source != nil && *sc.Source == "upload" && sc.FileName != nil && sc.UploadedBy != nil:
				uploaded = &sc
			case sc.Ingestion == dotted.Name && sc.Source != nil && *sc.Source == "configmap" && sc.FileName == nil:
				declared = &sc
			}
			if sc.ScannedAt == nil {
				t.Errorf("scan %s has findings but no scannedAt", sc.Name)
			}
			failed = failed || sc.FailCount > 0 && len(sc.FailCounts) > 0
		}
		if uploaded == nil || declared == nil || !failed {
			t.Fatalf("no uploaded scan (%v), no scan of the declared %s (%v), or none with a FAIL finding (%v): the checks prove nothing",
				uploaded != nil, dotted.Name, declared != nil, failed)
		}
		scanColumns(t, k, ns, *uploaded)
		// Its Ingestion deleted, the scan no longer knows its report, on
		// either door.
		if err := admin.Delete(ctx, dotted); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "scan "+declared.Name+" without its report", func() (bool, string) {
			out := k.ok("get", "scan/"+declared.Name, "-n", ns, "-o", "json")
			return !strings.Contains(out, `"source"`), out
		})
		if sc := scansAgree(t, k, env, ns)[declared.Name]; sc.Source != nil || sc.UploadedBy != nil || sc.FileName != nil || sc.Ingestion != dotted.Name {
			t.Errorf("scan %s after its Ingestion was deleted: source %v uploadedBy %v fileName %v ingestion %q", sc.Name, sc.Source, sc.UploadedBy, sc.FileName, sc.Ingestion)
		}
	})

	t.Run("table cells show what a report holds and never act on the terminal", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		report := filepath.Join(t.TempDir(), "hostile.ocsf.json")
		if err := os.WriteFile(report, testenv.EscapesReport(t), 0o600); err != nil {
			t.Fatal(err)
		}
		var ing posturev1.Ingestion
		if err := json.Unmarshal([]byte(k.ok("create", "--raw", uploadPath(ns, "hostile.ocsf.json"), "-f", report)), &ing); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, admin, ns, ing.Name)
		for _, tc := range []struct {
			resource string
			shown    []string // cells that must appear, escaped
		}{
			{"findings", []string{"check" + testenv.HostileShown, "arn:" + testenv.HostileShown}},
			{"ingestionerrors", []string{"/k" + testenv.HostileShown}},
		} {
			t.Run(tc.resource, func(t *testing.T) {
				out := k.ok("get", tc.resource, "-n", ns, "--field-selector", "ingestion="+ing.Name)
				if testenv.ActsOnTerminal(out) {
					t.Errorf("kubectl get %s printed escape sequences raw:\n%q", tc.resource, out)
				}
				for _, want := range tc.shown {
					if !strings.Contains(out, want) {
						t.Errorf("kubectl get %s does not show %s:\n%s", tc.resource, want, out)
					}
				}
			})
		}
	})

	t.Run("?filename= is refused when repeated or unsafe to print", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		fixture := testenv.Fixture("aws_3_records.ocsf.json")
		for _, tc := range []struct {
			name, query, want string
		}{
			{"given twice", "?filename=a.ocsf.json&filename=b.ocsf.json", "query parameter filename is given 2 times; give it once"},
			{"a right-to-left override", "?filename=" + url.QueryEscape("invoice\u202Eexe.ocsf.json"), `query parameter filename: file name "invoice\u202eexe.ocsf.json" has the bidirectional formatting character U+202E at byte 7`},
			{"an isolate", "?filename=" + url.QueryEscape("a\u2066.ocsf.json"), "bidirectional formatting character U+2066 at byte 1"},
			{"an escape", "?filename=" + url.QueryEscape("a\x1b[31m.ocsf.json"), "control character U+001B at byte 1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := k.run(nil, "create", "--raw", "/apis/data.posture.dev/v1alpha1/namespaces/"+ns+"/uploads"+tc.query, "-f", fixture)
				if r.err == nil || !strings.Contains(r.stderr, "BadRequest") || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("want a 400 saying %q, got %v\n%s%s", tc.want, r.err, r.stdout, r.stderr)
				}
			})
		}
		var list posturev1.IngestionList
		if err := admin.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, ing := range list.Items {
			if f := ing.Spec.Source.Upload; f != nil && (f.Filename == "a.ocsf.json" || f.Filename == "b.ocsf.json") {
				t.Errorf("a refused upload was stored as %s (%s)", ing.Name, f.Filename)
			}
		}
	})

	t.Run("kubectl explain finds the served kinds", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		for resource, fields := range map[string][]string{"findings": {"statusCode"}, "scans": {"findingCount", "scannedAt", "failCounts", "fileName"}, "ingestionerrors": {"recordIndex"}} {
			r := k.run(nil, "explain", resource)
			for _, field := range fields {
				if r.err != nil || !strings.Contains(r.stdout, field) {
					t.Errorf("kubectl explain %s does not show %s: %v\n%s%s", resource, field, r.err, r.stdout, r.stderr)
				}
			}
		}
	})

	t.Run("a malformed report is a 400 naming the byte offset", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		bad := filepath.Join(t.TempDir(), "bad.ocsf.json")
		if err := os.WriteFile(bad, []byte(`[{"a":1},{"b":]`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := k.run(nil, "create", "--raw", uploadPath(ns, "bad.ocsf.json"), "-f", bad)
		if r.err == nil || !strings.Contains(r.stderr, "BadRequest") || !strings.Contains(r.stderr, "malformed JSON at byte 14") {
			t.Errorf("kubectl create --raw of a malformed report: %v\n%s%s", r.err, r.stdout, r.stderr)
		}
		r = k.run(nil, "create", "--raw", uploadPath(ns, "report.json"), "-f", bad)
		if r.err == nil || !strings.Contains(r.stderr, `must end in .ocsf.json`) {
			t.Errorf("a name without .ocsf.json was not refused: %v %s", r.err, r.stderr)
		}
	})

	t.Run("a report past the limit is a 413", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		big := filepath.Join(t.TempDir(), "big.ocsf.json")
		// Whitespace is valid JSON: only the size is wrong with it.
		if err := os.WriteFile(big, []byte("["+strings.Repeat(" ", 5<<20)+"]"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := k.run(nil, "create", "--raw", uploadPath(ns, "big.ocsf.json"), "-f", big)
		if r.err == nil || !strings.Contains(r.stderr, "larger than the upload limit of 4194304 bytes") {
			t.Errorf("kubectl create --raw of a 5 MiB report: %v\n%s%s", r.err, r.stdout, r.stderr)
		}
	})

	t.Run("the default file name", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		out := k.ok("create", "--raw", uploadPath(ns, ""), "-f", testenv.Fixture("aws_3_records.ocsf.json"))
		var ing posturev1.Ingestion
		if err := json.Unmarshal([]byte(out), &ing); err != nil {
			t.Fatal(err)
		}
		if got := ing.Spec.Source.Upload.Filename; got != aggregated.DefaultUploadFilename {
			t.Errorf("file name %q, want %q", got, aggregated.DefaultUploadFilename)
		}
		waitCompleted(t, admin, ns, ing.Name)
	})

	t.Run("RBAC decides who uploads and reads", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		bindUser(t, admin, ns, "ci-bot", "posture-uploader")
		// envtest runs no controller manager, so nothing aggregates
		// posture-data-view into view here: bind the role itself.
		bindUser(t, admin, ns, "auditor", "posture-data-view")
		fixture := testenv.Fixture("aws_3_records.ocsf.json")
		for _, tc := range []struct {
			name, user string
			args       []string
			forbidden  string // "" when allowed
		}{
			{"nobody may not upload", "nobody", []string{"create", "--raw", uploadPath(ns, "x.ocsf.json"), "-f", fixture}, `cannot create resource "uploads"`},
			{"nobody may not read", "nobody", []string{"get", "findings", "-n", ns}, `cannot list resource "findings"`},
			{"the uploader uploads", "ci-bot", []string{"create", "--raw", uploadPath(ns, "x.ocsf.json"), "-f", fixture}, ""},
			{"the uploader does not read findings", "ci-bot", []string{"get", "findings", "-n", ns}, `cannot list resource "findings"`},
			{"view reads findings", "auditor", []string{"get", "findings", "-n", ns, "--chunk-size=0", "-o", "name"}, ""},
			{"view does not upload", "auditor", []string{"create", "--raw", uploadPath(ns, "x.ocsf.json"), "-f", fixture}, `cannot create resource "uploads"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := k.run(nil, append(tc.args, "--as", tc.user)...)
				if tc.forbidden == "" {
					if r.err != nil {
						t.Fatalf("%v\n%s", r.err, r.stderr)
					}
					if tc.user == "ci-bot" {
						var ing posturev1.Ingestion
						if err := json.Unmarshal([]byte(r.stdout), &ing); err != nil {
							t.Fatal(err)
						}
						if ing.Spec.RequestedBy.User != "ci-bot" {
							t.Errorf("requestedBy.user %q, want the Kubernetes user ci-bot", ing.Spec.RequestedBy.User)
						}
						waitCompleted(t, admin, ns, ing.Name)
					}
					return
				}
				if r.err == nil || !strings.Contains(r.stderr, "Forbidden") || !strings.Contains(r.stderr, tc.forbidden) {
					t.Errorf("want Forbidden (%s), got %v\n%s%s", tc.forbidden, r.err, r.stdout, r.stderr)
				}
			})
		}
	})

	t.Run("another tenant's namespace", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		other := newTenant(t, admin, true)
		// The uploader of the first tenant has no binding here.
		r := k.run(nil, "create", "--raw", uploadPath(other, "x.ocsf.json"), "-f", testenv.Fixture("aws_3_records.ocsf.json"), "--as", "ci-bot")
		if r.err == nil || !strings.Contains(r.stderr, "Forbidden") {
			t.Errorf("ci-bot uploaded into another tenant's namespace: %v %s", r.err, r.stderr)
		}
		r = k.run(nil, "get", "findings", "-n", other, "--as", "auditor")
		if r.err == nil || !strings.Contains(r.stderr, "Forbidden") {
			t.Errorf("the auditor read another tenant's findings: %v %s", r.err, r.stderr)
		}
		// Whoever may look finds only that tenant's own (no) findings:
		// the namespace selects the tenant.
		eventually(t, func() error {
			out := k.run(nil, "get", "findings", "-n", other, "-o", "name")
			if out.err != nil {
				return fmt.Errorf("%v: %s", out.err, out.stderr)
			}
			if strings.TrimSpace(out.stdout) != "" {
				t.Fatalf("another tenant's namespace lists findings:\n%s", out.stdout)
			}
			return nil
		})
		r = k.run(nil, "get", "findings", "-n", "default")
		if r.err == nil || !strings.Contains(r.stderr, "NotFound") || !strings.Contains(r.stderr, "belongs to no Tenant") {
			t.Errorf("a namespace of no tenant: %v %s", r.err, r.stderr)
		}
	})

	t.Run("a tenant without a subscription gets 402", func(t *testing.T) {
		k := kubectl{t: t, kubeconfig: k.kubeconfig}
		unpaid := newTenant(t, admin, false)
		eventually(t, func() error {
			r := k.run(nil, "create", "--raw", uploadPath(unpaid, "x.ocsf.json"), "-f", testenv.Fixture("aws_3_records.ocsf.json"))
			if r.err == nil {
				t.Fatalf("an unsubscribed tenant uploaded: %s", r.stdout)
			}
			if !strings.Contains(r.stderr, "PaymentRequired") || !strings.Contains(r.stderr, "has no active subscription") {
				return fmt.Errorf("%s", r.stderr)
			}
			return nil
		})
		var list posturev1.IngestionList
		if err := admin.List(context.Background(), &list, client.InNamespace(unpaid)); err != nil || len(list.Items) != 0 {
			t.Errorf("a refused upload left %d Ingestions (%v)", len(list.Items), err)
		}
	})
}

// eventually retries f while the manager's cache catches up with a Tenant
// just created.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "the manager's cache to catch up", func() (bool, string) {
		err := f()
		return err == nil, fmt.Sprint(err)
	})
}

func countFindings(t *testing.T, st store.Store, tenant string, q store.FindingQuery) int {
	t.Helper()
	q.Page = store.Page{Number: 1, Size: 1}
	_, n, err := st.ListFindings(context.Background(), tenant, q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
