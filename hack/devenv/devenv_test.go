package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/cli"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

// The whole of make dev, as a person uses it: the real devenv binary starts
// the real control plane, manager and MCP server; the test uploads the
// example reports over HTTP, kill -9's the manager in the middle of an
// ingestion, stops make dev, starts it again and resets it.
func TestDevEnvironment(t *testing.T) {
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	buildBinaries(t, dir)
	environ := append(os.Environ(),
		"KUBEBUILDER_ASSETS="+assets,
		"POSTURE_DEV_API_ADDR="+freeAddr(t),
		"POSTURE_DEV_MCP_ADDR="+freeAddr(t),
		"POSTURE_DEV_METRICS_ADDR="+freeAddr(t),
		"POSTURE_DEV_AGGREGATED_ADDR="+freeAddr(t),
		// 300 records a second: the 1,500-record report takes 5 s per
		// attempt, so the kill below lands in the middle of one; small
		// batches and a short poll make the progress visible early.
		"POSTURE_DEV_MANAGER_ARGS=--ingest-records-per-second=300 --ingest-batch-size=50 --poll-interval=200ms",
	)

	first := startDev(t, dir, environ)
	api := first.api(t)
	var crashed, mixed string

	ok := t.Run("a manager killed mid-ingestion is restarted and the ingestion finishes exactly", func(t *testing.T) {
		crashed = api.upload(t, "aws_1500_records.ocsf.json")
		// Killed once part of the report is stored: the next attempt has
		// rows to rewrite, not to add.
		ing := api.waitIngestion(t, crashed, 30*time.Second, func(a ingestionAttrs) bool {
			return a.Status == "processing" && a.Summary.Processed > 0
		})
		if ing.Summary.Processed >= 1500 {
			t.Fatalf("the ingestion was not paced: %+v before the kill", ing)
		}
		pid := first.managerPID(t)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 the manager (pid %d): %v", pid, err)
		}
		first.waitLog(t, "restarted manager", 30*time.Second)
		if again := first.managerPID(t); again == pid {
			t.Errorf(".dev/manager.pid still names the killed manager (pid %d)", pid)
		}

		ing = api.waitIngestion(t, crashed, 90*time.Second, func(a ingestionAttrs) bool {
			return a.Status == "completed" || a.Status == "failed"
		})
		if ing.Status != "completed" || ing.Summary != (summary{Total: 1500, Processed: 1500, Invalid: 0}) {
			t.Errorf("after the crash the ingestion is %+v, want completed with total = processed = 1500, invalid 0", ing)
		}
		if n := api.findingsCount(t); n != 1500 {
			t.Errorf("GET /api/v1/findings counts %d findings, want exactly 1500", n)
		}
		if attempt := first.attempt(t, crashed); attempt < 2 {
			t.Errorf("status.attempt = %d: the ingestion finished on the attempt that was killed, so no recovery was shown", attempt)
		}
	})
	if !ok {
		t.FailNow()
	}

	t.Run("the mixed example completes with its invalid records explained", func(t *testing.T) {
		mixed = api.upload(t, "aws_mixed_7_records.ocsf.json")
		ing := api.waitIngestion(t, mixed, 60*time.Second, func(a ingestionAttrs) bool {
			return a.Status == "completed" || a.Status == "failed"
		})
		if ing.Status != "completed" || ing.Summary != (summary{Total: 7, Processed: 7, Invalid: 4}) {
			t.Errorf("the mixed example is %+v, want completed with 7 records, 4 invalid (examples/README.md)", ing)
		}
		if n := api.errorsCount(t, mixed); n != 4 {
			t.Errorf("GET /api/v1/ingestions/%s/errors counts %d rows, want one per invalid record: 4", mixed, n)
		}
	})

	t.Run("kubectl reaches the aggregated API through kube-apiserver", func(t *testing.T) {
		available := api.kubectl(t, "get", "apiservice", "v1alpha1.data.posture.dev", "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}")
		if available != "True" {
			t.Errorf("kubectl get apiservice v1alpha1.data.posture.dev reads Available=%q, want True", available)
		}
		names := strings.Fields(api.kubectl(t, "get", "findings", "-n", api.vars["POSTURE_TENANT_NAMESPACE"], "--chunk-size=400", "-o", "name"))
		if want := api.findingsCount(t); len(names) != want {
			t.Errorf("kubectl get findings lists %d, GET /api/v1/findings counts %d", len(names), want)
		}
	})

	t.Run("a user bound to view reads findings, as in a cluster", func(t *testing.T) {
		ns := api.vars["POSTURE_TENANT_NAMESPACE"]
		api.kubectl(t, "create", "rolebinding", "auditor-view", "-n", ns, "--clusterrole=view", "--user=auditor")
		names := strings.Fields(api.kubectl(t, "get", "findings", "-n", ns, "--as", "auditor", "-o", "name"))
		if want := api.findingsCount(t); len(names) != want {
			t.Errorf("kubectl get findings --as a view user lists %d, GET /api/v1/findings counts %d", len(names), want)
		}
	})

	t.Run("the web UI is at POSTURE_UI_URL and both seeded users sign in there", func(t *testing.T) {
		res, err := http.Get(api.vars["POSTURE_UI_URL"])
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET POSTURE_UI_URL (%s) = %d %s, want the UI's page", api.vars["POSTURE_UI_URL"], res.StatusCode, res.Header.Get("Content-Type"))
		}
		for _, user := range []string{"POSTURE_ADMIN", "POSTURE_VIEWER"} {
			email, password := api.vars[user+"_EMAIL"], api.vars[user+"_PASSWORD"]
			if email == "" || password == "" {
				t.Errorf(".dev/env lacks %s_EMAIL or %s_PASSWORD", user, user)
				continue
			}
			body, _ := json.Marshal(map[string]any{"data": map[string]any{"type": "tokens", "attributes": map[string]string{"email": email, "password": password}}})
			req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(api.vars["POSTURE_UI_URL"], "/")+"/ui/session", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/vnd.api+json")
			req.Header.Set("X-Posture-UI", "1")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNoContent {
				t.Errorf("sign-in to the UI as %s (%s) = %d, want 204", user, email, res.StatusCode)
			}
		}
	})

	t.Run("the metrics endpoint counts both ingestions for the token in .dev/env and refuses anyone else", func(t *testing.T) {
		// The manager restarted after the kill: its counters hold the
		// crashed ingestion's end (1500 valid) and the mixed one's (3 valid,
		// 4 invalid, 4 error rows).
		want := map[string]float64{
			`posture_ingestions_ended_total{phase="completed"}`: 2,
			`posture_ingestion_records_total{result="valid"}`:   1503,
			`posture_ingestion_records_total{result="invalid"}`: 4,
			`posture_ingestions{phase="completed"}`:             2,
			"posture_ingestion_queue_depth":                     0,
		}
		url, token := first.metrics(t)
		testenv.Eventually(t, 30*time.Second, "the ingestions on "+url, func() (bool, string) {
			code, series := scrapeMetrics(t, url, token)
			var wrong []string
			for name, v := range want {
				if got, ok := series[name]; !ok || got != v {
					wrong = append(wrong, fmt.Sprintf("%s = %v (present %t), want %v", name, got, ok, v))
				}
			}
			errorRows := 0.0
			for name, v := range series {
				if strings.HasPrefix(name, "posture_ingestion_errors_total{") {
					errorRows += v
				}
			}
			if errorRows != 4 {
				wrong = append(wrong, fmt.Sprintf("posture_ingestion_errors_total sums to %v over its codes, want 4", errorRows))
			}
			return code == http.StatusOK && len(wrong) == 0, fmt.Sprintf("%d: %s", code, strings.Join(wrong, "; "))
		})
		if code, _ := scrapeMetrics(t, url, ""); code != http.StatusUnauthorized {
			t.Errorf("an anonymous scrape of %s answered %d, want 401", url, code)
		}
	})

	t.Run("the GitOps samples applied with kubectl end Current, their findings visible through the API", func(t *testing.T) {
		api.kubectl(t, "apply", "-k", filepath.Join(testenv.Root(), "config", "samples", "gitops"))
		objects := []string{"tenant/gitops-demo", "apikey/ci-scanner", "ingestion/nightly-2026-11-24", "providers"}
		testenv.Eventually(t, 90*time.Second, "every sample object to read kstatus Current", func() (bool, string) {
			var notCurrent []string
			for _, o := range objects {
				var list unstructured.UnstructuredList
				out := api.kubectl(t, append([]string{"get", "-n", "tenant-gitops-demo", "-o", "json"}, strings.Fields(o)...)...)
				if strings.Contains(o, "/") {
					var one unstructured.Unstructured
					if err := one.UnmarshalJSON([]byte(out)); err != nil {
						t.Fatal(err)
					}
					list.Items = append(list.Items, one)
				} else if err := list.UnmarshalJSON([]byte(out)); err != nil {
					t.Fatal(err)
				}
				if len(list.Items) == 0 {
					notCurrent = append(notCurrent, o+": none yet")
				}
				for _, item := range list.Items {
					res, err := kstatus.Compute(&item)
					if err != nil || res.Status != kstatus.CurrentStatus {
						notCurrent = append(notCurrent, fmt.Sprintf("%s %s: %v %v", item.GetKind(), item.GetName(), res, err))
					}
				}
			}
			return len(notCurrent) == 0, strings.Join(notCurrent, "; ")
		})
		sample := devAPI{url: api.url, key: "pk_sample01.REPLACE_ME_with_a_key_of_your_own_see_docs_gitops_md", vars: api.vars}
		if n := sample.findingsCount(t); n != 3 {
			t.Errorf("GET /api/v1/findings with the sample's adopted key counts %d, want the sample report's 3", n)
		}
	})

	t.Run("make dev-reset refuses while make dev runs", func(t *testing.T) {
		out, err := devenvCommand(dir, environ, "reset").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "already running") {
			t.Errorf("devenv reset while running: %v, %s; want a refusal", err, out)
		}
		if !exists(filepath.Join(dir, ".dev", storeName)) {
			t.Error("devenv reset removed the store of a running make dev")
		}
	})

	// Ctrl-C in the middle of an ingestion: the next make dev finishes it.
	interrupted := api.upload(t, "aws_1500_records.ocsf.json")
	api.waitIngestion(t, interrupted, 30*time.Second, func(a ingestionAttrs) bool {
		return a.Status == "processing" && a.Summary.Processed > 0
	})
	first.stop(t)
	if exists(filepath.Join(dir, ".dev", "env")) {
		t.Error(".dev/env outlived make dev")
	}

	second := startDev(t, dir, environ)
	t.Run("a second make dev keeps the data", func(t *testing.T) {
		again := second.api(t)
		ing := again.waitIngestion(t, interrupted, 90*time.Second, func(a ingestionAttrs) bool {
			return a.Status == "completed" || a.Status == "failed"
		})
		if ing.Status != "completed" || ing.Summary != (summary{Total: 1500, Processed: 1500, Invalid: 0}) {
			t.Errorf("the ingestion stopped by Ctrl-C is %+v after the restart, want completed 1500/1500/0", ing)
		}
		if again.key != api.key {
			t.Error("the demo admin's API key changed between runs")
		}
		listed := again.listIngestions(t)
		for id, want := range map[string]summary{crashed: {Total: 1500, Processed: 1500}, mixed: {Total: 7, Processed: 7, Invalid: 4}} {
			got, ok := listed[id]
			if !ok || got.Status != "completed" || got.Summary != want {
				t.Errorf("ingestion %s of the first run is %+v (listed: %t), want completed %+v", id, got, ok, want)
			}
		}
		// The same report again rewrites the same 1,500 findings.
		if n := again.findingsCount(t); n != 1503 {
			t.Errorf("GET /api/v1/findings counts %d findings, want the first run's 1500 + 3", n)
		}
	})
	t.Run("the README's push example runs with .dev/env alone", func(t *testing.T) {
		again := second.api(t)
		if again.vars["SERVICE_CLOUD_API_KEY"] != again.vars["POSTURE_API_KEY"] || again.vars["SERVICE_CLOUD_API_BASE_URL"] != again.vars["POSTURE_API_URL"] {
			t.Fatalf(".dev/env has SERVICE_CLOUD_API_KEY=%q SERVICE_CLOUD_API_BASE_URL=%q, want the demo admin's key and %s",
				again.vars["SERVICE_CLOUD_API_KEY"], again.vars["SERVICE_CLOUD_API_BASE_URL"], again.vars["POSTURE_API_URL"])
		}
		env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
		for k, v := range again.vars {
			env = append(env, k+"="+v)
		}
		var out, errOut bytes.Buffer
		code := cli.RunWithInput(context.Background(), []string{"push", filepath.Join(testenv.Root(), "examples", "aws_mixed_7_records.ocsf.json")},
			strings.NewReader(""), &out, &errOut, env)
		if code != cli.ExitOK || !strings.Contains(out.String(), "Findings pushed") {
			t.Errorf("postctl push with .dev/env: exit %d\n%s%s", code, out.String(), errOut.String())
		}
	})
	second.stop(t)

	t.Run("make dev-reset wipes the data", func(t *testing.T) {
		if out, err := devenvCommand(dir, environ, "reset").CombinedOutput(); err != nil {
			t.Fatalf("devenv reset: %v\n%s", err, out)
		}
		for _, name := range append([]string{etcdDirName}, storeFiles...) {
			if exists(filepath.Join(dir, ".dev", name)) {
				t.Errorf(".dev/%s is still there after make dev-reset", name)
			}
		}
	})
}

// buildBinaries builds what make dev runs into dir/bin, as make dev does.
func buildBinaries(t *testing.T, dir string) {
	t.Helper()
	for _, pkg := range []string{"./cmd/manager", "./cmd/mcp-server", "./hack/devenv"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", filepath.Base(pkg)), pkg)
		cmd.Dir = testenv.Root()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func devenvCommand(dir string, environ []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(dir, "bin", "devenv"), args...)
	cmd.Dir = dir
	cmd.Env = environ
	return cmd
}

// dev is one running make dev.
type dev struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

// startDev runs devenv in dir, as make dev runs it in the repository, and
// waits until it wrote .dev/env.
func startDev(t *testing.T, dir string, environ []string) *dev {
	t.Helper()
	d := &dev{dir: dir, cmd: devenvCommand(dir, environ), done: make(chan struct{})}
	// Its own process group, so that the control plane envtest starts
	// under it can be ended with it if the test fails half-way.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.mu.Lock()
			d.log.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
				<-d.done
			}
		}
		if t.Failed() {
			t.Logf("make dev's output:\n%s", d.output())
		}
	})
	testenv.Eventually(t, 3*time.Minute, "make dev to write .dev/env", func() (bool, string) {
		select {
		case <-d.done:
			t.Fatalf("make dev exited before it was up:\n%s", d.output())
		default:
		}
		return exists(filepath.Join(dir, ".dev", "env")), d.output()
	})
	return d
}

func (d *dev) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// stop is Ctrl-C: make dev must stop everything and exit 0.
func (d *dev) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("make dev did not stop within 60s of Ctrl-C:\n%s", d.output())
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("make dev exited %d after Ctrl-C:\n%s", code, d.output())
	}
}

func (d *dev) waitLog(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("make dev to log %q", text), func() (bool, string) {
		return strings.Contains(d.output(), text), "not logged yet"
	})
}

func (d *dev) managerPID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, ".dev", "manager.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf(".dev/manager.pid: %v", err)
	}
	return pid
}

// attempt reads the Ingestion's status.attempt with .dev/kubeconfig, as kubectl would.
func (d *dev) attempt(t *testing.T, id string) int32 {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(d.dir, ".dev", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var ing posturev1.Ingestion
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "tenant-demo", Name: id}, &ing); err != nil {
		t.Fatal(err)
	}
	return ing.Status.Attempt
}

// devAPI calls the API with what .dev/env exports, as the README's curl does.
type devAPI struct {
	url, key string
	vars     map[string]string // all of .dev/env
}

func (d *dev) api(t *testing.T) devAPI {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, ".dev", "env"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if ok {
			if unquoted, err := strconv.Unquote(value); err == nil {
				value = unquoted
			}
			vars[name] = value
		}
	}
	a := devAPI{url: vars["POSTURE_API_URL"], key: vars["POSTURE_API_KEY"], vars: vars}
	if a.url == "" || a.key == "" {
		t.Fatalf(".dev/env lacks POSTURE_API_URL or POSTURE_API_KEY:\n%s", b)
	}
	return a
}

// try sends req and decodes a 2xx answer into into.
func (a devAPI) try(req *http.Request, into any) error {
	req.Header.Set("Authorization", "Api-Key "+a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s %s: %v in %s", req.Method, req.URL, err, body)
	}
	return nil
}

func (a devAPI) do(t *testing.T, req *http.Request, into any) {
	t.Helper()
	if err := a.try(req, into); err != nil {
		t.Fatal(err)
	}
}

func (a devAPI) get(t *testing.T, path string, into any) {
	t.Helper()
	a.do(t, a.getRequest(t, path), into)
}

func (a devAPI) getRequest(t *testing.T, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// upload is the README's curl -F file=@examples/<name>.
func (a devAPI) upload(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write(data)
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, a.url+"/api/v1/ingestions", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var doc struct {
		Data struct{ ID string } `json:"data"`
	}
	a.do(t, req, &doc)
	if doc.Data.ID == "" {
		t.Fatalf("upload of %s returned no id", name)
	}
	return doc.Data.ID
}

// The API's shapes are the clients' (restapi); the requests stay the
// README's curl commands.
type (
	summary        = restapi.IngestionSummary
	ingestionAttrs = restapi.Ingestion
)

// waitIngestion polls the ingestion until done says so. The API may be
// away meanwhile (the manager is restarting), so failed requests are retried.
// It asks five times a second: the key's rate limit (10 a second) must leave
// room for the test's next requests.
func (a devAPI) waitIngestion(t *testing.T, id string, timeout time.Duration, done func(ingestionAttrs) bool) ingestionAttrs {
	t.Helper()
	var attrs ingestionAttrs
	testenv.EventuallyEvery(t, timeout, 200*time.Millisecond, "ingestion "+id, func() (bool, string) {
		var doc struct {
			Data struct {
				Attributes ingestionAttrs `json:"attributes"`
			} `json:"data"`
		}
		err := a.try(a.getRequest(t, "/api/v1/ingestions/"+id), &doc)
		attrs = doc.Data.Attributes
		return err == nil && done(attrs), fmt.Sprintf("%+v (last error: %v)", attrs, err)
	})
	return attrs
}

func (a devAPI) listIngestions(t *testing.T) map[string]ingestionAttrs {
	t.Helper()
	var doc struct {
		Data []struct {
			ID         string         `json:"id"`
			Attributes ingestionAttrs `json:"attributes"`
		} `json:"data"`
	}
	a.get(t, "/api/v1/ingestions?page[size]=100", &doc)
	out := map[string]ingestionAttrs{}
	for _, d := range doc.Data {
		out[d.ID] = d.Attributes
	}
	return out
}

// count reads meta.pagination.count of a list.
func (a devAPI) count(t *testing.T, path string) int {
	t.Helper()
	var doc struct {
		Meta struct {
			Pagination struct {
				Count *int `json:"count"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	a.get(t, path, &doc)
	if doc.Meta.Pagination.Count == nil {
		t.Fatalf("GET %s has no meta.pagination.count", path)
	}
	return *doc.Meta.Pagination.Count
}

// kubectl runs the real kubectl with .dev/env's KUBECONFIG, as a user of
// make dev would, and fails t when it fails.
func (a devAPI) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", a.vars["KUBECONFIG"]}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (a devAPI) findingsCount(t *testing.T) int {
	return a.count(t, "/api/v1/findings?page[size]=1")
}

func (a devAPI) errorsCount(t *testing.T, id string) int {
	return a.count(t, fmt.Sprintf("/api/v1/ingestions/%s/errors?page[size]=1", id))
}

// metrics is what .dev/env exports for reading the manager's metrics.
func (d *dev) metrics(t *testing.T) (url, token string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, ".dev", "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if unquoted, err := strconv.Unquote(value); ok && err == nil {
			value = unquoted
		}
		switch name {
		case "POSTURE_METRICS_URL":
			url = value
		case "POSTURE_METRICS_TOKEN":
			token = value
		}
	}
	if url == "" || token == "" {
		t.Fatalf(".dev/env lacks POSTURE_METRICS_URL or POSTURE_METRICS_TOKEN:\n%s", b)
	}
	return url, token
}

// scrapeMetrics reads the endpoint as curl -k would, the series keyed as
// the text format writes them (name{labels}), histograms left out.
func scrapeMetrics(t *testing.T, url, token string) (int, map[string]float64) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// Self-signed, as in a cluster without --metrics-cert-dir.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	series := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			series[line[:i]] = v
		}
	}
	return resp.StatusCode, series
}
