package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/pushclient"
	"github.com/posture-dev/posture/internal/pushclient/pushtest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

// TestMain starts the package's control plane with the route of the
// aggregated API (the plugin's tests go through kube-aggregator).
func TestMain(m *testing.M) {
	var err error
	if aggregatorRoute, err = testenv.NewAggregatorRoute("", "posture-system"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	apitest.MainWith(m, aggregatorRoute.Option())
}

// kubeconfig writes a kubeconfig for the test control plane.
func kubeconfig(t *testing.T) string {
	t.Helper()
	return testenv.Kubeconfig(t, apitest.RESTConfig(), "envtest-admin")
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs postctl in-process with exactly env as its environment, and
// checks that the process environment is the same before and after.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runInput(t, env, strings.NewReader(""), args...)
}

func runInput(t *testing.T, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	before := os.Environ()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := RunWithInput(ctx, args, stdin, &out, &errOut, env)
	if after := os.Environ(); !slices.Equal(before, after) {
		t.Errorf("postctl %v changed the process environment", args)
	}
	return result{code, out.String(), errOut.String()}
}

// envWith is a minimal environment plus key=value pairs ("" values dropped).
func envWith(kv ...string) []string {
	env := []string{"HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			env = append(env, kv[i]+"="+kv[i+1])
		}
	}
	return env
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(apitest.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace holding one Deployment; compliant makes it
// pass every check (with a NetworkPolicy beside it), otherwise it runs a
// privileged container.
func namespace(t *testing.T, compliant bool) string {
	t.Helper()
	ctx := context.Background()
	cs := clientset(t)
	ns := "cli-" + strings.ToLower(uuid.NewString()[:8])
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	sc := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if !compliant {
		sc = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	labels := map[string]string{"app": "web"}
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName:           "web",
				AutomountServiceAccountToken: ptr.To(false),
				SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)},
				Containers: []corev1.Container{{
					Name: "web", Image: "registry.example.com/web:1.0", SecurityContext: sc,
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				}},
			}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	if compliant {
		_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "default-deny"},
			Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	return ns
}

// upload is what a test API server saw of one push.
type upload struct {
	mu       sync.Mutex
	filename string
	body     []byte
	tmpFiles map[string][]byte // *.ocsf.json files in TMPDIR while the request was served
}

func (u *upload) record(tmpDir string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.tmpFiles = map[string][]byte{}
		entries, _ := os.ReadDir(tmpDir)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".ocsf.json") {
				b, _ := os.ReadFile(filepath.Join(tmpDir, e.Name()))
				u.tmpFiles[e.Name()] = b
			}
		}
		_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if p, err := multipart.NewReader(r.Body, params["boundary"]).NextPart(); err == nil {
			u.filename = p.FileName()
			u.body, _ = io.ReadAll(p)
		}
		next.ServeHTTP(w, r)
	})
}

// TestScanPush runs real scans with --push-to-cloud against a real HTTPS
// server on loopback that is trusted only through REQUESTS_CA_BUNDLE, through
// every console outcome, for a failing and a passing scan, with and without
// OCSF among the chosen formats.
func TestScanPush(t *testing.T) {
	kc := kubeconfig(t)
	scans := map[string]struct {
		ns   string
		code int
	}{
		"failing": {namespace(t, false), ExitFindings},
		"passing": {namespace(t, true), ExitOK},
	}
	ca := pushtest.NewCA(t, "private CA")
	caFile := ca.WriteFile(t, t.TempDir(), "private-ca.pem")
	other := pushtest.NewCA(t, "other CA")
	otherFile := other.WriteFile(t, t.TempDir(), "other-ca.pem")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	deadURL := "https://" + dead.Addr().String()
	dead.Close()
	target := pushtest.NewTLSServer(t, ca, pushtest.Accepted(uuid.NewString(), 1))

	outcomes := []struct {
		name    string
		handler http.Handler // nil: no server
		key     string
		base    string // default: the server
		bundle  string
		stream  string // where the message goes: stdout or stderr
		phrases []string
	}{
		{"pushed", pushtest.Accepted("0c5a2f52-7d7e-4a43-9a8e-3b8a1d0f6e21", 7), "pk_x.y", "", caFile, "stdout",
			[]string{"Findings pushed", "0c5a2f52-7d7e-4a43-9a8e-3b8a1d0f6e21", "https://app.example.com/scans"}},
		{"no key", pushtest.Accepted(uuid.NewString(), 7), "", "", caFile, "stderr",
			[]string{"Push skipped", "SERVICE_CLOUD_API_KEY"}},
		{"unreachable", nil, "pk_x.y", deadURL, caFile, "stderr",
			[]string{"Push failed", "unreachable", "Check the URL", "network"}},
		{"no subscription", pushtest.Error(402, "subscription_required", "tenant acme has no subscription"), "pk_x.y", "", caFile, "stderr",
			[]string{"Push failed", "needs a subscription"}},
		{"HTTP 401", pushtest.Error(401, "not_authenticated", "API key revoked"), "pk_x.y", "", caFile, "stderr",
			[]string{"Push failed", "HTTP 401", "Verify SERVICE_CLOUD_API_KEY", "permission"}},
		{"other status", pushtest.Error(500, "error", "internal error; the server log has the details"), "pk_x.y", "", caFile, "stderr",
			[]string{"Push failed", "HTTP 500", "internal error; the server log has the details"}},
		{"redirect", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}), "pk_x.y", "", caFile, "stderr", []string{"Push failed", "HTTP 307", "not followed"}},
		{"untrusted", pushtest.Accepted(uuid.NewString(), 7), "pk_x.y", "", otherFile, "stderr",
			[]string{"Push failed", "not trusted", "REQUESTS_CA_BUNDLE"}},
	}

	for _, oc := range outcomes {
		for _, formats := range []string{"", "csv"} {
			for scanName, sc := range scans {
				name := fmt.Sprintf("%s/%s/formats=%s", oc.name, scanName, formats)
				t.Run(name, func(t *testing.T) {
					tmp := t.TempDir()
					t.Setenv("TMPDIR", tmp)
					out := filepath.Join(t.TempDir(), "results")
					var up upload
					var srv *pushtest.Server
					base := oc.base
					if oc.handler != nil {
						srv = pushtest.NewTLSServer(t, ca, up.record(tmp, oc.handler))
						if base == "" {
							base = strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
						}
					}
					args := []string{"scan", "kubernetes", "-o", out, "--namespaces", sc.ns, "--output-filename", "scan", "--push-to-cloud"}
					if formats != "" {
						args = append(args, "--output-formats", formats)
					}
					env := envWith("KUBECONFIG", kc, pushclient.EnvAPIKey, oc.key, pushclient.EnvBaseURL, base,
						pushclient.EnvRequestsCABundle, oc.bundle, pushclient.EnvAppURL, "https://app.example.com")
					res := run(t, env, args...)

					// The exit code is the scan's, whatever the push did.
					if res.code != sc.code {
						t.Fatalf("exit code %d, want %d\n%s", res.code, sc.code, res)
					}
					msgStream := res.stderr
					if oc.stream == "stdout" {
						msgStream = res.stdout
					}
					// The message, and where the results were saved, in the same place.
					csvPath := filepath.Join(out, "scan.csv")
					ocsfPath := filepath.Join(out, "scan.ocsf.json")
					saved := "Scan results saved in " + ocsfPath + ", " + csvPath
					if formats == "csv" {
						saved = "Scan results saved in " + csvPath
					}
					for _, p := range append(oc.phrases, saved) {
						if !strings.Contains(msgStream, p) {
							t.Errorf("%s lacks %q\n%s", oc.stream, p, res)
						}
					}

					// What was written where.
					wantOut := []string{"scan.csv", "scan.ocsf.json"}
					if formats == "csv" {
						wantOut = []string{"scan.csv"}
					}
					if got := dirNames(t, out); !slices.Equal(got, wantOut) {
						t.Errorf("output directory holds %v, want %v", got, wantOut)
					}
					if left := dirNames(t, tmp); len(left) != 0 {
						t.Errorf("temporary directory still holds %v", left)
					}

					// One connection and at most one request; what was sent.
					if srv == nil {
						return
					}
					wantConns := int64(1)
					if oc.key == "" {
						wantConns = 0
					}
					if srv.Conns.Load() != wantConns {
						t.Errorf("%d TCP connections, want %d", srv.Conns.Load(), wantConns)
					}
					if srv.Requests.Load() > 1 {
						t.Errorf("%d requests", srv.Requests.Load())
					}
					if target.Requests.Load() != 0 {
						t.Errorf("a redirect was followed")
					}
					if srv.Requests.Load() == 0 || oc.name == "redirect" {
						return
					}
					if up.filename != "scan.ocsf.json" {
						t.Errorf("uploaded as %q", up.filename)
					}
					if formats == "csv" {
						// A temporary OCSF file in the system temp dir, gone afterwards.
						if len(up.tmpFiles) != 1 {
							t.Fatalf("during the upload TMPDIR held %d OCSF files", len(up.tmpFiles))
						}
						for name, b := range up.tmpFiles {
							if !bytes.Equal(b, up.body) {
								t.Errorf("the upload differs from the temporary file %s", name)
							}
						}
					} else {
						// The scan's own OCSF output, reused.
						if len(up.tmpFiles) != 0 {
							t.Errorf("a temporary file was written although OCSF is an output: %v", up.tmpFiles)
						}
						written, err := os.ReadFile(ocsfPath)
						must(t, err)
						if !bytes.Equal(written, up.body) {
							t.Error("the upload is not the OCSF output file")
						}
					}
					var records []map[string]any
					if err := json.Unmarshal(up.body, &records); err != nil || len(records) == 0 {
						t.Errorf("upload is not an OCSF array: %v", err)
					}
				})
			}
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

var jobRE = regexp.MustCompile(`ingestion job ([0-9a-f-]{36})`)

// TestAgainstTheAPI: pushed reports complete on the real ingestion API, and
// the ingestions commands follow them.
func TestAgainstTheAPI(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	kc := kubeconfig(t)
	ns := namespace(t, false)
	api := envWith(EnvAPIURL, env.URL, EnvAPIKey, env.APIKey)

	// A scan pushed through the temporary-file path.
	out := t.TempDir()
	res := run(t, envWith("KUBECONFIG", kc, pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL+"/"),
		"scan", "kubernetes", "-o", out, "--namespaces", ns, "--output-formats", "csv", "--push-to-cloud")
	if res.code != ExitFindings {
		t.Fatalf("scan: %s", res)
	}
	m := jobRE.FindStringSubmatch(res.stdout)
	if m == nil || !strings.Contains(res.stdout, env.URL+"/scans") {
		t.Fatalf("no job id or app link in the output\n%s", res)
	}
	scanJob := m[1]
	rows := strings.Count(readFile(t, filepath.Join(out, dirNames(t, out)[0])), "\n") - 1

	res = run(t, api, "ingestions", "wait", scanJob, "--interval", "50ms")
	if res.code != ExitOK || !strings.Contains(res.stdout, "Status:       completed") {
		t.Fatalf("wait: %s", res)
	}
	// Not a terminal: plain progress lines, no bar.
	if strings.Contains(res.stdout, "\r") || !strings.Contains(res.stdout, "ingestion "+scanJob+": completed") {
		t.Errorf("wait output:\n%s", res.stdout)
	}
	job := getJSON(t, api, scanJob)
	if job.Status != "completed" || job.Summary.Total != int64(rows) || job.Summary.Processed != int64(rows) || job.Summary.Invalid != 0 {
		t.Errorf("scan job: %+v, want %d records all valid", job, rows)
	}

	// A report of another scanner.
	res = run(t, envWith(pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL), "push", testenv.Fixture("aws_3_records.ocsf.json"))
	if res.code != ExitOK || !strings.Contains(res.stdout, "Findings pushed") ||
		!strings.Contains(res.stdout, "Scan results saved in "+testenv.Fixture("aws_3_records.ocsf.json")) {
		t.Fatalf("push: %s", res)
	}
	awsJob := jobRE.FindStringSubmatch(res.stdout)[1]
	// SERVICE_CLOUD_* are fallbacks for the ingestions commands.
	res = run(t, envWith(pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL), "ingestions", "wait", awsJob, "--interval", "50ms", "-o", "json")
	if res.code != ExitOK {
		t.Fatalf("wait: %s", res)
	}
	var doc struct {
		Data ingestion `json:"data"`
	}
	must(t, json.Unmarshal([]byte(res.stdout), &doc))
	if doc.Data.Attributes.Status != "completed" || doc.Data.Attributes.Summary.Processed != 3 {
		t.Errorf("wait -o json: %s", res.stdout)
	}

	// A report whose records are all invalid: the job fails.
	res = run(t, envWith(pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL), "push", testenv.Fixture("example_output_kubernetes.ocsf.json"))
	if res.code != ExitOK {
		t.Fatalf("push: %s", res)
	}
	badJob := jobRE.FindStringSubmatch(res.stdout)[1]
	res = run(t, api, "ingestions", "wait", badJob, "--interval", "50ms")
	if res.code != ExitJobFailed || !strings.Contains(res.stderr, "postctl ingestions errors "+badJob) {
		t.Fatalf("wait on a failing job: %s", res)
	}
	res = run(t, api, "ingestions", "errors", badJob)
	if res.code != ExitOK || !strings.Contains(res.stdout, "missing_account") || !strings.HasPrefix(res.stdout, "RECORD") {
		t.Errorf("errors: %s", res)
	}
	res = run(t, api, "ingestions", "errors", badJob, "-o", "json", "--all")
	var errDoc restapi.ListDocument[restapi.IngestionError]
	must(t, json.Unmarshal([]byte(res.stdout), &errDoc))
	if res.code != ExitOK || len(errDoc.Data) == 0 || errDoc.Data[0].Attributes.Code == "" {
		t.Errorf("errors -o json: %s", res)
	}
	res = run(t, api, "ingestions", "errors", awsJob)
	if res.code != ExitOK || !strings.Contains(res.stdout, "has no errors") {
		t.Errorf("errors of a clean job: %s", res)
	}

	// list and get.
	res = run(t, api, "ingestions", "list")
	if res.code != ExitOK || !strings.HasPrefix(res.stdout, "ID") {
		t.Fatalf("list: %s", res)
	}
	for _, id := range []string{scanJob, awsJob, badJob} {
		if !strings.Contains(res.stdout, id) {
			t.Errorf("list lacks %s:\n%s", id, res.stdout)
		}
	}
	res = run(t, api, "ingestions", "list", "--status", "failed", "-o", "json")
	var list restapi.ListDocument[restapi.Ingestion]
	must(t, json.Unmarshal([]byte(res.stdout), &list))
	if len(list.Data) != 1 || list.Data[0].ID != badJob || list.Meta.Version != "v1" {
		t.Errorf("list --status failed: %s", res.stdout)
	}
	res = run(t, api, "ingestions", "list", "--page-size", "1", "--sort", "inserted_at")
	if !strings.Contains(res.stdout, "Page 1 of 3") || strings.Count(res.stdout, "\n") != 3 {
		t.Errorf("paged list: %s", res)
	}
	res = run(t, api, "ingestions", "list", "--page-size", "1", "--all", "-o", "json")
	must(t, json.Unmarshal([]byte(res.stdout), &list))
	if len(list.Data) != 3 {
		t.Errorf("list --all: %d jobs", len(list.Data))
	}
	res = run(t, api, "ingestions", "get", awsJob)
	if res.code != ExitOK || !strings.Contains(res.stdout, "Records:      3 total, 3 processed, 0 invalid") {
		t.Errorf("get: %s", res)
	}

	// A report whose fields hold escape sequences: the errors table shows
	// them, escaped, and none reaches the terminal.
	hostile := filepath.Join(t.TempDir(), "hostile.ocsf.json")
	must(t, os.WriteFile(hostile, testenv.EscapesReport(t), 0o600))
	res = run(t, envWith(pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL), "push", hostile)
	if res.code != ExitOK {
		t.Fatalf("push: %s", res)
	}
	hostileJob := jobRE.FindStringSubmatch(res.stdout)[1]
	if res = run(t, api, "ingestions", "wait", hostileJob, "--interval", "50ms"); res.code != ExitOK {
		t.Fatalf("wait: %s", res)
	}
	res = run(t, api, "ingestions", "errors", hostileJob)
	if res.code != ExitOK || testenv.ActsOnTerminal(res.stdout) {
		t.Errorf("errors printed escape sequences raw: %q", res)
	}
	for _, want := range []string{"/k" + testenv.HostileShown, "uid" + testenv.HostileShown} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("errors does not show %s:\n%s", want, res.stdout)
		}
	}

	// Failures of the ingestions commands.
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{envWith(EnvAPIURL, env.URL, EnvAPIKey, apitest.NewKey()), []string{"ingestions", "list"}, ExitError, "HTTP 401"},
		{envWith(EnvAPIURL, env.URL, EnvAPIKey, apitest.NewKey()), []string{"ingestions", "list"}, ExitError, "Verify POSTURE_API_KEY"},
		{envWith(EnvAPIURL, env.URL, EnvAPIKey, env.APIKey), []string{"ingestions", "get", uuid.NewString()}, ExitError, "HTTP 404"},
		{envWith(EnvAPIURL, env.URL), []string{"ingestions", "list"}, ExitError, "no credentials"},
		{envWith(EnvAPIURL, "ftp://x", EnvAPIKey, "k"), []string{"ingestions", "list"}, ExitUsage, "is not usable"},
		{api, []string{"ingestions", "list", "-o", "yaml"}, ExitUsage, "table or json"},
		{api, []string{"ingestions", "list", "--page-size", "500"}, ExitUsage, "between 1 and 100"},
		{api, []string{"ingestions", "get"}, ExitUsage, "needs an ingestion job id"},
		// A dot segment would read the list the API redirects it to.
		{api, []string{"ingestions", "get", "."}, ExitUsage, `ingestion id: "." is not an id`},
		{api, []string{"ingestions", "errors", ".."}, ExitUsage, `ingestion id: ".." is not an id`},
	} {
		res := run(t, tc.env, tc.args...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: want exit %d and %q\n%s", tc.args, tc.code, tc.want, res)
		}
	}
}

// TestPushRefusedByTheAPI: the real API's 401 and 402 give the spec's messages.
func TestPushRefusedByTheAPI(t *testing.T) {
	report := testenv.Fixture("aws_1500_records.ocsf.json")
	unsubscribed := apitest.Start(t, apitest.Options{Unsubscribed: true})
	res := run(t, envWith(pushclient.EnvAPIKey, unsubscribed.APIKey, pushclient.EnvBaseURL, unsubscribed.URL), "push", report)
	if res.code != ExitError || !strings.Contains(res.stderr, "needs a subscription") || !strings.Contains(res.stderr, "Scan results saved in "+report) {
		t.Errorf("unsubscribed: %s", res)
	}
	res = run(t, envWith(pushclient.EnvAPIKey, apitest.NewKey(), pushclient.EnvBaseURL, unsubscribed.URL), "push", report)
	if res.code != ExitError || !strings.Contains(res.stderr, "HTTP 401") || !strings.Contains(res.stderr, "Verify SERVICE_CLOUD_API_KEY") {
		t.Errorf("bad key: %s", res)
	}
	res = run(t, envWith(pushclient.EnvBaseURL, unsubscribed.URL), "push", report)
	if res.code != ExitError || !strings.Contains(res.stderr, "Push skipped") {
		t.Errorf("no key: %s", res)
	}
	notOCSF := filepath.Join(t.TempDir(), "report.json")
	must(t, os.WriteFile(notOCSF, []byte("[]"), 0o644))
	res = run(t, envWith(pushclient.EnvAPIKey, unsubscribed.APIKey, pushclient.EnvBaseURL, unsubscribed.URL), "push", notOCSF)
	if res.code != ExitError || !strings.Contains(res.stderr, "Nothing was sent") {
		t.Errorf("wrong file name: %s", res)
	}
}

func TestToken(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	var got struct {
		ctype, accept, auth string
		body                map[string]any
	}
	srv := pushtest.NewTLSServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/tokens" {
			http.NotFound(w, r)
			return
		}
		got.ctype, got.accept, got.auth = r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&got.body)
		attrs, _ := got.body["data"].(map[string]any)["attributes"].(map[string]any)
		if attrs["password"] != "s3cret pass" {
			pushtest.Error(401, "not_authenticated", "email or password is wrong")(w, r)
			return
		}
		w.Header().Set("Content-Type", restapi.MediaType)
		_, _ = io.WriteString(w, `{"data":{"type":"tokens","id":"t1","attributes":{"access":"eyJ.access","refresh":"eyJ.refresh"}},"meta":{"version":"v1"}}`)
	}))
	env := envWith(EnvAPIURL, srv.URL, pushclient.EnvRequestsCABundle, caFile)

	res := runInput(t, env, strings.NewReader("s3cret pass\n"), "token", "--email", "admin@example.com", "--password-stdin")
	if res.code != ExitOK || res.stdout != "eyJ.access\n" {
		t.Fatalf("token: %s", res)
	}
	attrs := got.body["data"].(map[string]any)["attributes"].(map[string]any)
	if got.ctype != restapi.MediaType || got.accept != restapi.MediaType || got.auth != "" ||
		got.body["data"].(map[string]any)["type"] != "tokens" || attrs["email"] != "admin@example.com" {
		t.Errorf("request: %+v", got)
	}
	res = run(t, append(env, EnvPassword+"=s3cret pass"), "token", "--email", "admin@example.com", "--tenant", "acme", "-o", "json")
	var pair map[string]string
	must(t, json.Unmarshal([]byte(res.stdout), &pair))
	if res.code != ExitOK || pair["access"] != "eyJ.access" || pair["refresh"] != "eyJ.refresh" {
		t.Errorf("token -o json: %s", res)
	}
	if got.body["data"].(map[string]any)["attributes"].(map[string]any)["tenant"] != "acme" {
		t.Errorf("tenant not sent: %v", got.body)
	}
	res = run(t, append(env, EnvPassword+"=wrong"), "token", "--email", "admin@example.com")
	if res.code != ExitError || !strings.Contains(res.stderr, "HTTP 401") || !strings.Contains(res.stderr, "signing in as admin@example.com") {
		t.Errorf("bad password: %s", res)
	}
	res = run(t, env, "token", "--email", "admin@example.com")
	if res.code != ExitUsage || !strings.Contains(res.stderr, "no password") {
		t.Errorf("no password: %s", res)
	}
	res = run(t, env, "token")
	if res.code != ExitUsage || !strings.Contains(res.stderr, "--email") {
		t.Errorf("no email: %s", res)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{[]string{"--version"}, ExitOK, "postctl version"},
		{[]string{"frobnicate"}, ExitUsage, "unknown command"},
		{[]string{"scan"}, ExitUsage, "postctl scan kubernetes"},
		{[]string{"scan", "aws"}, ExitUsage, `unknown scan target "aws"`},
		{[]string{"scan", "kubernetes", "--output-formats", "html"}, ExitUsage, `unknown output format "html"`},
		{[]string{"scan", "kubernetes", "--checks", "nope"}, ExitUsage, `unknown check "nope"`},
		{[]string{"scan", "kubernetes", "--output-filename", "a/b"}, ExitUsage, "not a path"},
		{[]string{"scan", "kubernetes", "--no-such-flag"}, ExitUsage, "unknown flag"},
		{[]string{"scan", "kubernetes", "--list-checks"}, ExitOK, "rbac_cluster_admin_bindings"},
		{[]string{"scan", "kubernetes", "--push-to-cloud", "--push-to-cluster", "tenant-a"}, ExitUsage, "choose one"},
		{[]string{"scan", "kubernetes", "--push-to-cluster", "Tenant_A"}, ExitUsage, `--push-to-cluster "Tenant_A" is not a namespace name`},
		{[]string{"push"}, ExitUsage, "needs the report file"},
		{[]string{"ingestions"}, ExitUsage, "list, get, errors or wait"},
	} {
		res := run(t, envWith(), tc.args...)
		if res.code != tc.code || !strings.Contains(res.stdout+res.stderr, tc.out) {
			t.Errorf("%v: want exit %d and %q\n%s", tc.args, tc.code, tc.out, res)
		}
	}
	// No kubeconfig at all (HOME has none, not in a cluster).
	res := run(t, envWith(), "scan", "kubernetes", "-o", t.TempDir())
	if res.code != ExitError || !strings.Contains(res.stderr, "no cluster to scan") {
		t.Errorf("no kubeconfig: %s", res)
	}
}

func TestScanOutputs(t *testing.T) {
	kc := kubeconfig(t)
	ns := namespace(t, false)
	out := filepath.Join(t.TempDir(), "nested", "dir")
	res := run(t, envWith("KUBECONFIG", kc), "scan", "kubernetes", "-o", out, "--namespaces", ns, "-M", "json-ocsf", "--checks", "core_privileged_containers,networking_namespace_network_policy")
	if res.code != ExitFindings {
		t.Fatalf("%s", res)
	}
	names := dirNames(t, out)
	if len(names) != 1 || !regexp.MustCompile(`^postctl-kubernetes-\d{14}\.ocsf\.json$`).MatchString(names[0]) {
		t.Fatalf("outputs: %v", names)
	}
	var records []map[string]any
	must(t, json.Unmarshal([]byte(readFile(t, filepath.Join(out, names[0]))), &records))
	if len(records) != 2 {
		t.Fatalf("%d records", len(records))
	}
	um := records[0]["unmapped"].(map[string]any)
	if um["context"] != "envtest-admin" || um["cluster_name"] != "envtest" || um["provider"] != "kubernetes" {
		t.Errorf("unmapped: %v", um)
	}
	for _, want := range []string{"Scanned cluster envtest", "core_privileged_containers", "1 high", "Scan results saved in " + filepath.Join(out, names[0])} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q\n%s", want, res.stdout)
		}
	}
	// --cluster-id overrides the detected identity.
	res = run(t, envWith("KUBECONFIG", kc), "scan", "kubernetes", "-o", out, "-F", "fixed", "--namespaces", ns, "--cluster-id", "prod-eu-1", "-M", "json-ocsf")
	must(t, json.Unmarshal([]byte(readFile(t, filepath.Join(out, "fixed.ocsf.json"))), &records))
	if records[0]["unmapped"].(map[string]any)["provider_uid"] != "prod-eu-1" {
		t.Errorf("provider_uid: %v", records[0]["unmapped"])
	}
	// An unreachable cluster is an error, not a verdict.
	bad := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "u"}
	cfg.CurrentContext = "gone"
	must(t, clientcmd.WriteToFile(*cfg, bad))
	res = run(t, envWith("KUBECONFIG", bad), "scan", "kubernetes", "-o", t.TempDir(), "--timeout", "5s")
	if res.code != ExitError || !strings.Contains(res.stderr, "scanning cluster gone (https://127.0.0.1:1)") {
		t.Errorf("unreachable cluster: %s", res)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, terminal: true}
	job := ingestion{ID: "j"}
	job.Attributes.Status = "processing"
	job.Attributes.Summary = restapi.IngestionSummary{Total: 200, Processed: 50, Invalid: 2}
	p.update(job)
	job.Attributes.Status, job.Attributes.Summary.Processed = "completed", 200
	p.update(job)
	p.finish()
	want := "\r\x1b[K[#######-----------------------]  25% processing 50/200 processed, 2 invalid" +
		"\r\x1b[K[##############################] 100% completed 200/200 processed, 2 invalid\n"
	if buf.String() != want {
		t.Errorf("bar:\n%q\nwant\n%q", buf.String(), want)
	}
	buf.Reset()
	p = &progress{w: &buf}
	p.update(job)
	p.update(job)
	if strings.Count(buf.String(), "\n") != 1 || strings.Contains(buf.String(), "\r") {
		t.Errorf("plain lines: %q", buf.String())
	}
}

type jobView struct {
	Status  string
	Summary restapi.IngestionSummary
}

func getJSON(t *testing.T, env []string, id string) jobView {
	t.Helper()
	res := run(t, env, "ingestions", "get", id, "-o", "json")
	var doc struct {
		Data ingestion `json:"data"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, res)
	}
	return jobView{doc.Data.Attributes.Status, doc.Data.Attributes.Summary}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEnvironmentUntouched: with the variables set in the process
// environment itself, a push (trusted through the bundle, and refused for a
// bad bundle) leaves every variable as it was.
func TestEnvironmentUntouched(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	dir := t.TempDir()
	caFile := ca.WriteFile(t, dir, "ca.pem")
	srv := pushtest.NewTLSServer(t, ca, pushtest.Accepted(uuid.NewString(), 3))
	t.Setenv(pushclient.EnvAPIKey, "pk_env.key")
	t.Setenv(pushclient.EnvBaseURL, srv.URL+"/")
	t.Setenv(pushclient.EnvCurlCABundle, filepath.Join(dir, "ignored.pem"))
	for _, bundle := range []string{caFile, filepath.Join(dir, "missing.pem")} {
		t.Setenv(pushclient.EnvRequestsCABundle, bundle)
		before := os.Environ()
		res := run(t, os.Environ(), "push", testenv.Fixture("aws_3_records.ocsf.json"))
		if (bundle == caFile) != (res.code == ExitOK) {
			t.Errorf("bundle %s: %s", bundle, res)
		}
		if !slices.Equal(before, os.Environ()) {
			t.Errorf("environment changed")
		}
		for k, v := range map[string]string{pushclient.EnvRequestsCABundle: bundle, pushclient.EnvCurlCABundle: filepath.Join(dir, "ignored.pem"), pushclient.EnvBaseURL: srv.URL + "/"} {
			if os.Getenv(k) != v {
				t.Errorf("%s = %q, want %q", k, os.Getenv(k), v)
			}
		}
	}
}
