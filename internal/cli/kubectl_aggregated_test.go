package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/internal/mute"
	"github.com/posture-dev/posture/internal/servingcert"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/webhook/aggregated"
)

// aggregatorRoute routes the package's control plane to a local aggregated
// API server (TestMain passes its flags to kube-apiserver).
var aggregatorRoute *testenv.AggregatorRoute

// TestKubectlPluginThroughKubeAggregator drives kubectl-posture against the
// real kube-apiserver, whose aggregator proxies data.posture.dev to an
// aggregated server that serves the certificate the manager issues itself
// (servingcert.Rotator + SecretSource), with caBundle kept in step.
func TestKubectlPluginThroughKubeAggregator(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aggregatorRoute.SetBackend(ln.Addr().String())
	admin, err := client.New(apitest.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := aggregatorRoute.Namespace
	rotator := &servingcert.Rotator{
		Client: admin, Namespace: ns, SecretName: "posture-aggregated-api-tls",
		APIServices: []string{servingcert.DefaultAPIServiceName},
		// kube-aggregator checks the name <service>.<namespace>.svc.
		Policy: servingcert.Policy{DNSNames: []string{testenv.AggregatedServiceName + "." + ns + ".svc"}},
		Log:    logr.Discard(),
	}
	src := &servingcert.SecretSource{Reader: admin, Namespace: ns, SecretName: rotator.SecretName,
		Interval: 100 * time.Millisecond, Bootstrap: rotator.CreateIfMissing, Log: logr.Discard()}
	env := apitest.Start(t, apitest.Options{
		Billing: &posturev1.Subscription{Active: true},
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			srv, err := aggregated.New(aggregated.Options{
				Listener: ln, Cert: src, RESTConfig: apitest.RESTConfig(),
				Client: mgr.GetClient(), Store: st, Log: ctrl.Log.WithName("aggregated"),
			})
			if err != nil {
				return err
			}
			return mgr.Add(srv)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The route registers the APIService with its own CA; the rotator then
	// replaces caBundle with the CA of the certificate the server serves.
	if err := aggregatorRoute.Register(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if _, err := rotator.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitAvailable(ctx, admin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), testenv.APIService(ns, nil)) })

	kc := []string{"--kubeconfig", kubeconfig(t)}
	plugin := func(args ...string) result { return runPlugin(nil, append(kc, args...)...) }
	tenantNS := env.Namespace
	created := regexp.MustCompile(`ingestion\.posture\.dev/(\S+) created`)

	var total int
	var first string // the Ingestion of the 1,500-record report
	t.Run("push --wait of the 1,500-record report completes", func(t *testing.T) {
		r := plugin("push", testenv.Fixture("aws_1500_records.ocsf.json"), "-n", tenantNS, "--wait", "--interval", "200ms")
		if r.code != ExitOK || !strings.Contains(r.stdout, "completed, 1500/1500 processed, 0 invalid") {
			t.Fatalf("%s", r)
		}
		m := created.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("no ingestion named in %q", r.stdout)
		}
		first = m[1]
		r = plugin("get", "ingestions", "-n", tenantNS)
		if r.code != ExitOK || !strings.Contains(r.stdout, m[1]) || !strings.Contains(r.stdout, "completed") || strings.Contains(r.stdout, "MESSAGE") {
			t.Errorf("get ingestions: %s", r)
		}
		// The CRD's priority 1 column, as kube-apiserver serves it.
		r = plugin("get", "ingestions", "-n", tenantNS, "-o", "wide")
		if r.code != ExitOK || !strings.HasSuffix(strings.Join(strings.Fields(strings.SplitN(r.stdout, "\n", 2)[0]), " "), "AGE MESSAGE") {
			t.Errorf("get ingestions -o wide: %s", r)
		}
	})

	t.Run("get scans -o wide adds FILE and SOURCE, lined up", func(t *testing.T) {
		if first == "" {
			t.Fatal("the push named no ingestion")
		}
		lines := func(r result) []string { return strings.Split(strings.TrimSpace(r.stdout), "\n") }
		r := plugin("get", "scans", "-n", tenantNS)
		if l := lines(r); r.code != ExitOK || strings.Join(strings.Fields(l[0]), " ") != "NAME PROVIDER FINDINGS FAIL INGESTION SCANNED AGE" ||
			strings.Contains(r.stdout, "aws_1500_records.ocsf.json") {
			t.Errorf("get scans: %s", r)
		}
		r = plugin("get", "scans", "-n", tenantNS, "-o", "wide", "--chunk-size", "1")
		l := lines(r)
		if r.code != ExitOK || strings.Join(strings.Fields(l[0]), " ") != "NAME PROVIDER FINDINGS FAIL INGESTION SCANNED AGE FILE SOURCE" {
			t.Fatalf("get scans -o wide: %s", r)
		}
		var scans int
		for _, row := range l[1:] {
			f := strings.Fields(row)
			if len(f) != 9 || f[4] != first {
				continue
			}
			scans++
			if f[7] != "aws_1500_records.ocsf.json" || f[8] != "upload" {
				t.Errorf("scan %s: FILE %q SOURCE %q, want the uploaded file's name and upload", f[0], f[7], f[8])
			}
			// Lined up: each value starts under its header.
			for _, c := range []struct{ header, value string }{{"FILE", f[7]}, {"SOURCE", f[8]}} {
				if strings.Index(l[0], c.header) != strings.Index(row, c.value) {
					t.Errorf("%s is not under %s:\n%s\n%s", c.value, c.header, l[0], row)
				}
			}
		}
		if scans == 0 {
			t.Errorf("no scan of ingestion %s listed:\n%s", first, r.stdout)
		}
		if r := plugin("get", "scans", "-n", tenantNS, "-o", "yaml"); r.code != ExitUsage ||
			!strings.Contains(r.stderr, `-o/--output must be table, wide, json or name, not "yaml"`) || r.stdout != "" {
			t.Errorf("get scans -o yaml: %s", r)
		}
	})
	_, total, err = env.Store.ListFindings(ctx, env.Tenant, store.FindingQuery{Page: store.Page{Number: 1, Size: 1}})
	if err != nil || total == 0 {
		t.Fatalf("the store holds %d findings (%v); the push failed", total, err)
	}

	t.Run("get findings pages through every finding, with field selectors", func(t *testing.T) {
		_, latest, err := env.Store.ListFindings(ctx, env.Tenant, store.FindingQuery{Latest: true, Page: store.Page{Number: 1, Size: 1}})
		if err != nil || latest == 0 {
			t.Fatalf("the current state holds %d findings (%v)", latest, err)
		}
		// The current state by default, the whole history with --history.
		for _, tc := range []struct {
			args []string
			want int
		}{
			{nil, latest},
			{[]string{"--history"}, total},
		} {
			r := plugin(append([]string{"get", "findings", "-n", tenantNS, "--chunk-size", "250"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != ExitOK || strings.Join(strings.Fields(lines[0]), " ") != "NAME SEVERITY STATUS CODE CHECK RESOURCE PROVIDER DELTA FIRST SEEN MUTED AGE" {
				t.Fatalf("get findings %v: header %q: %s", tc.args, lines[0], r)
			}
			if len(lines)-1 != tc.want {
				t.Errorf("get findings %v: %d rows, the store holds %d", tc.args, len(lines)-1, tc.want)
			}
		}
		rows, _, err := env.Store.ListFindings(ctx, env.Tenant, store.FindingQuery{Page: store.Page{Number: 1, Size: 1}})
		if err != nil {
			t.Fatal(err)
		}
		sev := rows[0].Severity
		_, want, err := env.Store.ListFindings(ctx, env.Tenant, store.FindingQuery{Severity: []string{sev}, Page: store.Page{Number: 1, Size: 1}})
		if err != nil {
			t.Fatal(err)
		}
		r := plugin("get", "findings", "-n", tenantNS, "--history", "--field-selector", "severity="+sev, "-o", "name", "--chunk-size", "100")
		if got := len(strings.Fields(r.stdout)); r.code != ExitOK || got != want {
			t.Errorf("severity=%s: %d names, the store has %d: %s", sev, got, want, r)
		}
	})

	t.Run("muted findings: left out of the current state, the MUTED column, muted=", func(t *testing.T) {
		rows, _, err := env.Store.ListFindings(ctx, env.Tenant, store.FindingQuery{Latest: true, Page: store.Page{Number: 1, Size: 1}})
		if err != nil || len(rows) == 0 {
			t.Fatalf("the current state: %v", err)
		}
		// The marks as the MuteRule controller writes them (no controller
		// runs here): the rule stored, then its pass to the end.
		rule := &posturev1.MuteRule{ObjectMeta: metav1.ObjectMeta{Name: "accepted", Namespace: tenantNS, Generation: 1},
			Spec: posturev1.MuteRuleSpec{Match: posturev1.MuteMatch{CheckID: rows[0].CheckID}, Reason: "accepted by the team"}}
		if err := env.Store.PutMuteRule(ctx, env.Tenant, mute.Stored(rule)); err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			p, err := env.Store.ApplyMuteRule(ctx, env.Tenant, rule.Name, 2000)
			if err != nil {
				t.Fatal(err)
			}
			done = p.Done
		}
		count := func(q store.FindingQuery) int {
			q.Latest, q.Page = true, store.Page{Number: 1, Size: 1}
			_, n, err := env.Store.ListFindings(ctx, env.Tenant, q)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		muted := count(store.FindingQuery{Muted: store.MutedOnly})
		if muted == 0 {
			t.Fatal("the rule muted nothing; the test would prove nothing")
		}
		for _, tc := range []struct {
			selector     []string
			rows, marked int
		}{
			{nil, count(store.FindingQuery{Muted: store.MutedExcluded}), 0},
			{[]string{"--field-selector", "muted=true"}, muted, muted},
			{[]string{"--field-selector", "muted=any"}, count(store.FindingQuery{Muted: store.MutedAny}), muted},
		} {
			r := plugin(append([]string{"get", "findings", "-n", tenantNS, "--chunk-size", "250"}, tc.selector...)...)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != ExitOK || len(lines)-1 != tc.rows {
				t.Fatalf("get findings %v: %d rows, the store %d: %s", tc.selector, len(lines)-1, tc.rows, r.stderr)
			}
			marked := 0
			for _, l := range lines[1:] {
				if slices.Contains(strings.Fields(l), "accepted") {
					marked++
				}
			}
			if marked != tc.marked {
				t.Errorf("get findings %v: %d rows name the rule under MUTED, want %d", tc.selector, marked, tc.marked)
			}
			if strings.Contains(r.stdout, "MUTE REASON") || strings.Contains(r.stdout, rule.Spec.Reason) {
				t.Errorf("get findings %v without -o wide shows the mute reason:\n%s", tc.selector, lines[0])
			}
		}
		// -o wide adds the rule's reason, last as the server orders it.
		r := plugin("get", "findings", "-n", tenantNS, "--field-selector", "muted=true", "-o", "wide", "--chunk-size", "250")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != ExitOK || strings.Join(strings.Fields(lines[0]), " ") != "NAME SEVERITY STATUS CODE CHECK RESOURCE PROVIDER DELTA FIRST SEEN MUTED AGE MUTE REASON" ||
			len(lines)-1 != muted {
			t.Fatalf("get findings muted=true -o wide: %d rows, %d muted: %s", len(lines)-1, muted, r)
		}
		at := strings.Index(lines[0], "MUTE REASON")
		for _, l := range lines[1:] {
			if !strings.HasSuffix(l, rule.Spec.Reason) || strings.Index(l, rule.Spec.Reason) != at {
				t.Fatalf("a muted finding's row does not end with the reason under MUTE REASON:\n%s\n%s", lines[0], l)
			}
		}
	})

	t.Run("export writes the REST export's file, page by page", func(t *testing.T) {
		// The current state as CSV: byte for byte the REST export.
		r := plugin("export", "-n", tenantNS, "--chunk-size", "250")
		if want := restExport(t, env, "/findings/latest/export?format=csv"); r.code != ExitOK || r.stdout != string(want) {
			t.Fatalf("export: %d bytes, the REST export %d: %s", len(r.stdout), len(want), r.stderr)
		}
		// The history as OCSF, into a file: every record, in the list's order.
		file := filepath.Join(t.TempDir(), "all.ocsf.json")
		r = plugin("export", "-n", tenantNS, "--history", "--format", "ocsf", "--output-file", file, "--chunk-size", "400")
		if r.code != ExitOK {
			t.Fatalf("%s", r)
		}
		got := recordUIDs(t, []byte(readFile(t, file)))
		if want := recordUIDs(t, restExport(t, env, "/findings/export?format=ocsf")); len(got) != total || !slices.Equal(got, want) {
			t.Fatalf("the OCSF file holds %d records; the REST export %d, the store %d", len(got), len(want), total)
		}
		// Field selectors as for get.
		r = plugin("export", "-n", tenantNS, "--history", "--field-selector", "statusCode=FAIL")
		rows := csvRows(t, []byte(r.stdout), export.Columns)
		if r.code != ExitOK || len(rows) == 0 || len(rows) >= total {
			t.Fatalf("statusCode=FAIL: %d of %d rows: %s", len(rows), total, r.stderr)
		}
		for _, row := range rows {
			if row[5] != "FAIL" {
				t.Fatalf("statusCode=FAIL exported %q", row)
			}
		}
		if r := plugin("export", "-n", tenantNS, "--format", "xml"); r.code != ExitUsage {
			t.Errorf("--format xml: %s", r)
		}
	})

	t.Run("errors of a report whose records are all invalid", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "invalid.ocsf.json")
		if err := os.WriteFile(bad, []byte(`[{"class_uid":2004},{"class_uid":2004}]`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := plugin("push", bad, "-n", tenantNS, "--wait", "--interval", "100ms")
		m := created.FindStringSubmatch(r.stdout)
		if r.code != ExitJobFailed || m == nil || !strings.Contains(r.stderr, "kubectl posture errors "+m[1]) {
			t.Fatalf("push --wait of an all-invalid report: %s", r)
		}
		r = plugin("errors", m[1], "-n", tenantNS)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != ExitOK || len(lines) < 3 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME RECORD CODE") {
			t.Errorf("errors %s: %s", m[1], r)
		}
		// Ingestion errors have no wide columns: -o wide prints the same table.
		if w := plugin("errors", m[1], "-n", tenantNS, "-o", "wide"); w.code != ExitOK || w.stdout != r.stdout {
			t.Errorf("errors %s -o wide:\n%s\nwant\n%s", m[1], w.stdout, r.stdout)
		}
		// A mistyped name is an error, as the REST API's 404, not an empty list.
		r = plugin("errors", m[1]+"x", "-n", tenantNS)
		if r.code != ExitError || !strings.Contains(r.stderr, "ingestion "+m[1]+"x not found in namespace "+tenantNS) {
			t.Errorf("errors of an unknown ingestion: %s", r)
		}
	})

	t.Run("table cells show what a report holds and never act on the terminal", func(t *testing.T) {
		report := filepath.Join(t.TempDir(), "hostile.ocsf.json")
		if err := os.WriteFile(report, testenv.EscapesReport(t), 0o600); err != nil {
			t.Fatal(err)
		}
		r := plugin("push", report, "-n", tenantNS, "--wait", "--interval", "100ms")
		m := created.FindStringSubmatch(r.stdout)
		if r.code != ExitOK || m == nil {
			t.Fatalf("push --wait of a report with escape sequences: %s", r)
		}
		for _, tc := range []struct {
			args  []string
			shown []string
		}{
			{[]string{"get", "findings", "-n", tenantNS, "--field-selector", "ingestion=" + m[1]}, []string{"check" + testenv.HostileShown, "arn:" + testenv.HostileShown}},
			{[]string{"errors", m[1], "-n", tenantNS}, []string{"/k" + testenv.HostileShown}},
		} {
			r := plugin(tc.args...)
			if r.code != ExitOK || testenv.ActsOnTerminal(r.stdout) {
				t.Errorf("kubectl posture %s printed escape sequences raw: %q", strings.Join(tc.args, " "), r)
			}
			for _, want := range tc.shown {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("kubectl posture %s does not show %s:\n%s", strings.Join(tc.args, " "), want, r.stdout)
				}
			}
		}
	})

	t.Run("a malformed report is refused with the byte offset", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.ocsf.json")
		if err := os.WriteFile(bad, []byte(`[{"a":1},{"b":]`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := plugin("push", bad, "-n", tenantNS)
		if r.code != ExitError || !strings.Contains(r.stderr, "malformed JSON at byte 14") || !strings.Contains(r.stderr, "400 Bad Request") {
			t.Errorf("%s", r)
		}
	})

	t.Run("RBAC: --as a user without rights, then bound to posture-uploader", func(t *testing.T) {
		report := testenv.Fixture("aws_3_records.ocsf.json")
		r := plugin("--as", "ci-bot", "push", report, "-n", tenantNS)
		if r.code != ExitError || !strings.Contains(r.stderr, "403 Forbidden") || !strings.Contains(r.stderr, `cannot create resource "uploads"`) {
			t.Fatalf("unbound user: %s", r)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ci-bot-uploader", Namespace: tenantNS},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ci-bot"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "posture-uploader"}}
		applyClusterRoles(t, admin)
		if err := admin.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "ci-bot's upload to be allowed", func() (bool, string) {
			r = plugin("--as", "ci-bot", "push", report, "-n", tenantNS, "--wait", "--interval", "100ms")
			return r.code == ExitOK, r.String()
		})
		if r := plugin("--as", "ci-bot", "get", "findings", "-n", tenantNS); r.code != ExitError || !strings.Contains(r.stderr, "403 Forbidden") {
			t.Errorf("posture-uploader reads findings: %s", r)
		}
	})

	t.Run("postctl scan --push-to-cluster uploads as the scanning identity", func(t *testing.T) {
		scanned := namespace(t, false)
		r := run(t, envWith("KUBECONFIG", kc[1]), "scan", "kubernetes", "-o", t.TempDir(), "--namespaces", scanned,
			"-M", "json-ocsf", "--push-to-cluster", tenantNS, "--ignore-exit-code-3")
		m := regexp.MustCompile(`Findings pushed into namespace ` + tenantNS + `: ingestion\.posture\.dev/(\S+) `).FindStringSubmatch(r.stdout)
		if r.code != ExitOK || m == nil || !strings.Contains(r.stdout, "Scan results saved in ") {
			t.Fatalf("scan --push-to-cluster with failing checks and -z: %s", r)
		}
		if w := plugin("wait", m[1], "-n", tenantNS, "--interval", "100ms"); w.code != ExitOK {
			t.Fatalf("the pushed scan's ingestion: %s", w)
		}
		// An identity that may read what it scans but not upload: the scan
		// stands, the push fails with what to bind.
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "scan-bot-read"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "serviceaccounts"}, Verbs: []string{"get", "list"}},
		}}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scan-bot-read"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "scan-bot"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}}
		for _, o := range []client.Object{cr, crb} {
			if err := admin.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
		// A binding reaches the API server's authorizer a moment after it
		// is stored; until then the scan could not even name the cluster.
		testenv.Eventually(t, 10*time.Second, "scan-bot's read of namespace kube-system to be allowed", func() (bool, string) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "scan-bot",
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces", Name: "kube-system"}}}
			if err := admin.Create(ctx, sar); err != nil {
				return false, err.Error()
			}
			return sar.Status.Allowed, sar.Status.Reason
		})
		bot := impersonating(t, kc[1], "scan-bot")
		r = run(t, envWith("KUBECONFIG", bot), "scan", "kubernetes", "-o", t.TempDir(), "--namespaces", scanned,
			"--push-to-cluster", tenantNS)
		// The checks it may not read are skipped; the failed push leaves the
		// exit code to the scan (no failing check: 0).
		if r.code != ExitOK || !strings.Contains(r.stderr, "Push failed: ") || !strings.Contains(r.stderr, "403 Forbidden") ||
			!strings.Contains(r.stderr, "bind it to the ClusterRole posture-uploader") || !strings.Contains(r.stderr, "Scan results saved in ") {
			t.Fatalf("scan-bot's push without the right to upload: %s", r)
		}
	})

	t.Run("a new CA and certificate keep the APIService available", func(t *testing.T) {
		// A CA is renewed years from now; an unreadable ca.key makes the
		// rotator renew both today, with certificates valid in real time,
		// so kube-aggregator really checks the new pair.
		var sec corev1.Secret
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: rotator.SecretName}, &sec); err != nil {
			t.Fatal(err)
		}
		before := servingcert.FromData(sec.Data)
		sec.Data[servingcert.KeyCAKey] = []byte("lost")
		if err := admin.Update(ctx, &sec); err != nil {
			t.Fatal(err)
		}
		if _, err := rotator.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		_, after := secretBundle(t, admin, ns, rotator.SecretName)
		if string(after.Cert) == string(before.Cert) || strings.Count(string(after.CAs), "BEGIN CERTIFICATE") != 2 {
			t.Fatalf("no new CA beside the old one: %d CAs", strings.Count(string(after.CAs), "BEGIN CERTIFICATE"))
		}
		testenv.Eventually(t, 30*time.Second, "the aggregated server to serve the renewed certificate", func() (bool, string) {
			cur, _ := src.CurrentCertKeyContent()
			return string(cur) == string(after.Cert), "the old certificate"
		})
		if err := testenv.WaitAvailable(ctx, admin); err != nil {
			t.Fatal(err)
		}
		if r := plugin("get", "scans", "-n", tenantNS); r.code != ExitOK {
			t.Errorf("after renewal: %s", r)
		}
	})

	t.Run("kubectl finds the plugin on PATH", func(t *testing.T) {
		bin := t.TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-posture"), "./cmd/kubectl-posture")
		build.Dir = testenv.Root()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		cmd := exec.Command("kubectl", append([]string{"posture"}, append(kc, "get", "findings", "--history", "-n", tenantNS, "-o", "name")...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.Fields(string(out))) < total {
			t.Errorf("kubectl posture get findings: %v\n%.500s", err, out)
		}
	})
}

// impersonating copies a kubeconfig, acting as user.
func impersonating(t *testing.T, kubeconfig, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func secretBundle(t *testing.T, c client.Client, ns, name string) (string, servingcert.Bundle) {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return s.ResourceVersion, servingcert.FromData(s.Data)
}

// applyClusterRoles installs config/rbac's roles of the aggregated API.
func applyClusterRoles(t *testing.T, c client.Client) {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.Root(), "config", "rbac", "aggregated_api_roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), u); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}
