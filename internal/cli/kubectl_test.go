package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/posture-dev/posture/internal/testenv"
)

// seenRequest is what the stand-in API server received.
type seenRequest struct {
	method, path, query string
	user, accept        string
	contentLength       int64
	body                string
}

// fakeKube answers like kube-apiserver for the few paths the plugin uses,
// over real HTTP on loopback, and records every request.
type fakeKube struct {
	mu   sync.Mutex
	seen []seenRequest
	// phases the Ingestion goes through, one per GET.
	phases []string
}

func (f *fakeKube) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
		user: r.Header.Get("Impersonate-User"), accept: r.Header.Get("Accept"), contentLength: r.ContentLength, body: string(body)})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/uploads"):
		if strings.Contains(string(body), "bad") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400,"message":"invalid report: byte offset 7: unexpected character"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"apiVersion":"posture.dev/v1alpha1","kind":"Ingestion","metadata":{"name":"ing-1","namespace":"tenant-a"},"status":{"phase":"pending"}}`)
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/ingestions/"):
		f.mu.Lock()
		phase := "completed"
		if len(f.phases) > 0 {
			phase, f.phases = f.phases[0], f.phases[1:]
		}
		f.mu.Unlock()
		fmt.Fprintf(w, `{"metadata":{"name":"ing-1"},"status":{"phase":%q,"message":"1 record invalid","summary":{"total":3,"processed":3,"invalid":1}}}`, phase)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/findings"):
		// Two pages: the first hands out a continue token.
		// The last column is a wide one (priority 1), printed only with -o wide.
		next, rows := "tok-2", `[{"cells":["High","FAIL","c1","pod/a","aws-1","5m","accepted risk"],"object":{"metadata":{"name":"f1"}}}]`
		if r.URL.Query().Get("continue") == "tok-2" {
			next, rows = "", `[{"cells":["Low","PASS","c2","pod/b","aws-1","6m",""],"object":{"metadata":{"name":"f2"}}}]`
		}
		fmt.Fprintf(w, `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"continue":%q},"columnDefinitions":[
			{"name":"Severity","type":"string"},{"name":"Status Code","type":"string"},{"name":"Check","type":"string"},
			{"name":"Resource","type":"string"},{"name":"Provider","type":"string"},{"name":"Age","type":"string"},
			{"name":"Mute Reason","type":"string","priority":1}],"rows":%s}`, next, rows)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/ingestionerrors"):
		fmt.Fprint(w, `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"columnDefinitions":[{"name":"Name","type":"string"},{"name":"Code","type":"string"}],"rows":[]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"the server could not find the requested resource"}`)
	}
}

// pluginKubeconfig writes a kubeconfig with two contexts on two servers:
// "main" (current, namespace tenant-a) and "other" (namespace tenant-b).
func pluginKubeconfig(t *testing.T, main, other string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["main"] = &clientcmdapi.Cluster{Server: main}
	kc.Clusters["other"] = &clientcmdapi.Cluster{Server: other}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t0ken"}
	kc.Contexts["main"] = &clientcmdapi.Context{Cluster: "main", AuthInfo: "u", Namespace: "tenant-a"}
	kc.Contexts["other"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "u", Namespace: "tenant-b"}
	kc.CurrentContext = "main"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func runPlugin(env []string, args ...string) result {
	var out, errOut strings.Builder
	code := RunKubectl(context.Background(), args, &out, &errOut, env)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestKubectlPluginUsage(t *testing.T) {
	env := []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get"}, "get needs one kind"},
		{[]string{"get", "pods"}, `get "pods": want ingestions, findings or scans`},
		{[]string{"get", "findings", "-o", "yaml"}, `-o/--output must be table, wide, json or name, not "yaml"`},
		{[]string{"get", "scans", "-o", "Wide"}, `-o/--output must be table, wide, json or name, not "Wide"`},
		{[]string{"errors", "ing-1", "-o", "custom-columns=NAME:.metadata.name"}, `-o/--output must be table, wide, json or name, not "custom-columns=NAME:.metadata.name"`},
		{[]string{"get", "findings", "--chunk-size", "-1"}, "--chunk-size must be 0 or more"},
		{[]string{"push"}, "push needs a report file"},
		{[]string{"push", "a", "b"}, "push needs a report file"},
		{[]string{"push", "a", "--interval", "0s"}, "--interval must be positive"},
		{[]string{"wait"}, "wait needs an ingestion name"},
		{[]string{"errors"}, "errors needs an ingestion name"},
		{[]string{"push", "x.json", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runPlugin(env, tc.args...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("got %s, want exit %d with %q", r, ExitUsage, tc.want)
			}
		})
	}
}

// The plugin's help and version read as kubectl runs it, "kubectl posture",
// never as kubectl itself.
func TestKubectlPluginHelpNamesThePlugin(t *testing.T) {
	env := []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  kubectl posture [command]", "help for kubectl posture", `Use "kubectl posture [command] --help"`}},
		{[]string{"get", "--help"}, []string{"Usage:\n  kubectl posture get ingestions|findings|scans [flags]", "kubectl posture get scans -n tenant-acme -o wide", "table, wide (every column"}},
		{[]string{"errors", "--help"}, []string{"table, wide (every column"}},
		{[]string{"push", "--help"}, []string{"Usage:\n  kubectl posture push FILE"}},
		{[]string{"--version"}, []string{"kubectl posture version "}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runPlugin(env, tc.args...)
			if r.code != 0 {
				t.Fatalf("got %s, want exit 0", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout %q does not say %q", r.stdout, w)
				}
			}
			if strings.Contains(r.stdout, "kubectl [command]") || strings.Contains(r.stdout, "help for kubectl\n") {
				t.Errorf("stdout names kubectl rather than the plugin: %q", r.stdout)
			}
		})
	}
}

// TestKubectlPluginRequests checks what the plugin sends for each command:
// the kubeconfig's server, namespace and identity, kubectl's flags
// (--context, -n, --as, --kubeconfig), and the API paths.
func TestKubectlPluginRequests(t *testing.T) {
	mainSrv, otherSrv := &fakeKube{}, &fakeKube{}
	m, o := httptest.NewServer(mainSrv), httptest.NewServer(otherSrv)
	defer m.Close()
	defer o.Close()
	kc := pluginKubeconfig(t, m.URL, o.URL)
	report := filepath.Join(t.TempDir(), "scan.ocsf.json")
	if err := os.WriteFile(report, []byte(`[{"class_uid":2004}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.ocsf.json")
	if err := os.WriteFile(bad, []byte(`[{bad`), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		phases   []string
		srv      *fakeKube
		code     int
		want     []seenRequest // method, path, query, user checked; empty fields not compared
		stdout   []string
		without  []string // text stdout must not hold
		stderr   string
		bodyFile string
	}{
		{name: "push: KUBECONFIG, context namespace, filename from the file", env: []string{"KUBECONFIG=" + kc},
			args: []string{"push", report}, srv: mainSrv,
			want:   []seenRequest{{method: "POST", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/uploads", query: "filename=scan.ocsf.json"}},
			stdout: []string{"ingestion.posture.dev/ing-1 created in namespace tenant-a (scan.ocsf.json)"}, bodyFile: report},
		{name: "push --wait follows to completed", args: []string{"--kubeconfig", kc, "push", report, "-n", "tenant-x", "--filename", "ci.ocsf.json", "--wait", "--interval", "10ms"},
			phases: []string{"pending", "processing", "completed"}, srv: mainSrv,
			want: []seenRequest{
				{method: "POST", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-x/uploads", query: "filename=ci.ocsf.json"},
				{method: "GET", path: "/apis/posture.dev/v1alpha1/namespaces/tenant-x/ingestions/ing-1"},
				{method: "GET", path: "/apis/posture.dev/v1alpha1/namespaces/tenant-x/ingestions/ing-1"},
				{method: "GET", path: "/apis/posture.dev/v1alpha1/namespaces/tenant-x/ingestions/ing-1"},
			},
			stdout: []string{"ingestion ing-1: pending, 3/3 processed", "ingestion ing-1: completed, 3/3 processed, 1 invalid"}},
		{name: "push refused: the Status message, exit 1", args: []string{"--kubeconfig", kc, "push", bad}, srv: mainSrv, code: ExitError,
			want:   []seenRequest{{method: "POST", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/uploads"}},
			stderr: "upload " + bad + " to namespace tenant-a: invalid report: byte offset 7: unexpected character (400 Bad Request)"},
		{name: "wait on a failed ingestion: exit 4", args: []string{"--kubeconfig", kc, "wait", "ing-1", "--interval", "10ms"}, phases: []string{"failed"},
			srv: mainSrv, code: ExitJobFailed,
			want:   []seenRequest{{method: "GET", path: "/apis/posture.dev/v1alpha1/namespaces/tenant-a/ingestions/ing-1"}},
			stderr: "ingestion ing-1 failed: 1 record invalid; kubectl posture errors ing-1 -n tenant-a tells why"},
		{name: "get findings: --context, --as, field selector, chunks", args: []string{"--kubeconfig", kc, "--context", "other", "--as", "alice",
			"get", "findings", "--field-selector", "severity=High", "--chunk-size", "1"}, srv: otherSrv,
			want: []seenRequest{
				{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-b/findings", query: "fieldSelector=latest%3Dtrue%2Cseverity%3DHigh&limit=1", user: "alice", accept: tableAccept},
				{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-b/findings", query: "continue=tok-2&fieldSelector=latest%3Dtrue%2Cseverity%3DHigh&limit=1", user: "alice"},
			},
			stdout:  []string{"SEVERITY   STATUS CODE   CHECK   RESOURCE   PROVIDER   AGE\n", "High       FAIL          c1      pod/a      aws-1      5m\n", "Low        PASS          c2"},
			without: []string{"MUTE REASON", "accepted risk"}},
		// Every column, in the server's order, lined up across both pages.
		{name: "get findings -o wide: the priority 1 columns too", args: []string{"--kubeconfig", kc, "get", "findings", "-o", "wide"}, srv: mainSrv,
			want: []seenRequest{{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", accept: tableAccept},
				{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "continue=tok-2&fieldSelector=latest%3Dtrue&limit=500"}},
			stdout: []string{"SEVERITY   STATUS CODE   CHECK   RESOURCE   PROVIDER   AGE   MUTE REASON\n" +
				"High       FAIL          c1      pod/a      aws-1      5m    accepted risk\n" +
				"Low        PASS          c2      pod/b      aws-1      6m    <none>\n"}},
		{name: "get findings -o name", args: []string{"--kubeconfig", kc, "get", "finding", "-o", "name"}, srv: mainSrv,
			want: []seenRequest{{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "fieldSelector=latest%3Dtrue&limit=500"},
				{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "continue=tok-2&fieldSelector=latest%3Dtrue&limit=500"}},
			stdout: []string{"f1\nf2\n"}},
		{name: "get findings --history: no latest selector", args: []string{"--kubeconfig", kc, "get", "findings", "--history", "-o", "name", "--field-selector", "statusCode=FAIL"}, srv: mainSrv,
			want: []seenRequest{{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "fieldSelector=statusCode%3DFAIL&limit=500"},
				{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "continue=tok-2&fieldSelector=statusCode%3DFAIL&limit=500"}}},
		{name: "get findings: a latest selector of the user's is kept", args: []string{"--kubeconfig", kc, "get", "findings", "-o", "name", "--field-selector", "latest=false"}, srv: mainSrv,
			want: []seenRequest{{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "fieldSelector=latest%3Dfalse&limit=500"},
				{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-a/findings", query: "continue=tok-2&fieldSelector=latest%3Dfalse&limit=500"}}},
		{name: "get scans --history is refused", args: []string{"--kubeconfig", kc, "get", "scans", "--history"}, srv: mainSrv, code: ExitUsage,
			stderr: "--history applies to findings, not to scans"},
		// One request: the server answers a mistyped name with a 404.
		{name: "errors: the ingestion field selector", args: []string{"--kubeconfig", kc, "errors", "ing-1", "-n", "tenant-c"}, srv: mainSrv,
			want:   []seenRequest{{method: "GET", path: "/apis/data.posture.dev/v1alpha1/namespaces/tenant-c/ingestionerrors", query: "fieldSelector=ingestion%3Ding-1&limit=500"}},
			stderr: "No resources found in tenant-c namespace."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.srv.requests())
			tc.srv.mu.Lock()
			tc.srv.phases = tc.phases
			tc.srv.mu.Unlock()
			r := runPlugin(tc.env, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tc.code, r)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tc.without {
				if strings.Contains(r.stdout, s) {
					t.Errorf("stdout holds %q:\n%s", s, r.stdout)
				}
			}
			if tc.stderr != "" && !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
			got := tc.srv.requests()[before:]
			if len(got) != len(tc.want) {
				t.Fatalf("%d requests, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.method != w.method || g.path != w.path || (w.query != "" && g.query != w.query) || g.user != w.user ||
					(w.accept != "" && g.accept != w.accept) {
					t.Errorf("request %d: %+v, want %+v", i, g, w)
				}
			}
			if tc.bodyFile != "" {
				data, _ := os.ReadFile(tc.bodyFile)
				if got[0].body != string(data) || got[0].contentLength != int64(len(data)) {
					t.Errorf("upload body %q (Content-Length %d), want the file's %d bytes", got[0].body, got[0].contentLength, len(data))
				}
			}
		})
	}

	t.Run("get -o json gathers every page into one List", func(t *testing.T) {
		r := runPlugin(nil, "--kubeconfig", kc, "get", "findings", "-o", "json")
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || list.Kind != "List" {
			t.Fatalf("%s", r)
		}
	})
}

// TestKubectlPluginEscapesCells: the plugin prints table cells, names and
// an Ingestion's message through termsafe whatever the server sends, so a
// server that does not escape them (an older manager) cannot reach the
// terminal through it either.
func TestKubectlPluginEscapesCells(t *testing.T) {
	hostile, _ := json.Marshal(testenv.HostileText)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/ingestions/"):
			fmt.Fprintf(w, `{"metadata":{"name":"ing-1"},"status":{"phase":"failed","message":%s,"summary":{"total":1,"processed":1,"invalid":1}}}`, hostile)
		default:
			fmt.Fprintf(w, `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"columnDefinitions":[{"name":"Check","type":"string"},{"name":"Resource","type":"string"}],
				"rows":[{"cells":[%s,%s],"object":{"metadata":{"name":%s}}}]}`, hostile, hostile, hostile)
		}
	}))
	defer srv.Close()
	kc := pluginKubeconfig(t, srv.URL, srv.URL)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"table", []string{"get", "findings"}},
		{"-o name", []string{"get", "findings", "-o", "name"}},
		{"errors", []string{"errors", "ing-1"}},
		{"wait on a failed ingestion", []string{"wait", "ing-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(nil, append([]string{"--kubeconfig", kc}, tc.args...)...)
			if testenv.ActsOnTerminal(r.stdout) || testenv.ActsOnTerminal(r.stderr) {
				t.Errorf("escape sequences printed raw: %q", r)
			}
			if !strings.Contains(r.stdout+r.stderr, testenv.HostileShown) {
				t.Errorf("the text is not shown escaped: %s", r)
			}
		})
	}
}

// TestTableColumns: the columns a table prints are kubectl get's, priority 0
// by default and every one with -o wide, in the server's order whatever the
// priorities' order.
func TestTableColumns(t *testing.T) {
	defs := []metav1.TableColumnDefinition{
		{Name: "Name"}, {Name: "Detail", Priority: 2}, {Name: "Status Code"}, {Name: "Age"}, {Name: "Mute Reason", Priority: 1},
	}
	for _, tc := range []struct {
		name   string
		defs   []metav1.TableColumnDefinition
		wide   bool
		cells  []any
		header string
		row    string
	}{
		{"default: priority 0 only", defs, false, []any{"f1", "more", "FAIL", "5m", "accepted"},
			"NAME\tSTATUS CODE\tAGE", "f1\tFAIL\t5m"},
		{"wide: every column in the server's order", defs, true, []any{"f1", "more", "FAIL", "5m", "accepted"},
			"NAME\tDETAIL\tSTATUS CODE\tAGE\tMUTE REASON", "f1\tmore\tFAIL\t5m\taccepted"},
		{"wide: empty and missing cells are <none>, numbers as integers", defs, true, []any{"f1", "", nil, float64(3), ""},
			"NAME\tDETAIL\tSTATUS CODE\tAGE\tMUTE REASON", "f1\t<none>\t<none>\t3\t<none>"},
		{"wide: a short row ends early", defs, true, []any{"f1", "more", "FAIL"},
			"NAME\tDETAIL\tSTATUS CODE\tAGE\tMUTE REASON", "f1\tmore\tFAIL"},
		{"wide without wide columns is the default", defs[2:4], true, []any{"FAIL", "5m"},
			"STATUS CODE\tAGE", "FAIL\t5m"},
		{"a column name is escaped", []metav1.TableColumnDefinition{{Name: "a\x1b]0;x\a"}}, false, []any{"v"},
			`A\x1b]0;X\x07`, "v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := tableColumns(tc.defs, tc.wide)
			if got := tableHeader(tc.defs, cols); got != tc.header {
				t.Errorf("header %q, want %q", got, tc.header)
			}
			if got := tableRow(tc.cells, cols); got != tc.row {
				t.Errorf("row %q, want %q", got, tc.row)
			}
		})
	}
}
