package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/posture-dev/posture/internal/testenv"
)

// TestGracefulShutdown runs the manager binary against a real control plane
// with SQLite, starts a slow upload, sends SIGTERM, and checks what a client
// and the kubelet see: readiness turns false, new connections are refused,
// the upload in flight finishes within the drain period, and one that
// outlasts it is answered 503 with Retry-After, not blamed on the client.
func TestGracefulShutdown(t *testing.T) {
	env, _, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := writeKubeconfig(t, env)
	k8s, err := client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-demo"}}); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	report, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		drain  time.Duration
		finish bool // the client sends the rest of the body after SIGTERM
		status int
	}{
		{"an upload in flight completes within the drain period", 30 * time.Second, true, http.StatusAccepted},
		{"an upload that outlasts the drain period gets 503 with Retry-After", time.Second, false, http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := startManagerProcess(t, bin, kubeconfig, tc.drain)
			up := startUpload(t, m, report)
			m.terminate(t)
			m.waitUnready(t)
			if c, err := net.DialTimeout("tcp", m.api, time.Second); err == nil {
				c.Close()
				t.Fatal("the API accepted a new connection while draining")
			}
			if tc.finish {
				up.finish(t)
			}
			r := up.response(t, tc.drain+10*time.Second)
			if r.status != tc.status {
				t.Fatalf("upload answered %d %s; want %d", r.status, r.body, tc.status)
			}
			if tc.status == http.StatusServiceUnavailable {
				var doc struct {
					Errors []struct{ Code string } `json:"errors"`
				}
				if err := json.Unmarshal(r.body, &doc); err != nil || len(doc.Errors) != 1 || doc.Errors[0].Code != "unavailable" {
					t.Fatalf("503 body %s; want one error with code unavailable", r.body)
				}
				if r.header.Get("Retry-After") == "" {
					t.Fatal("503 without Retry-After")
				}
			}
			m.wait(t, tc.drain+20*time.Second)
		})
	}
}

func writeKubeconfig(t *testing.T, env *envtest.Environment) string {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "shutdown-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type manager struct {
	cmd         *exec.Cmd
	api, probes string
	key         string
	log         *bytes.Buffer
	done        chan error
}

const testKey = "pk_shutdown.0123456789abcdef0123456789abcdef"

func startManagerProcess(t *testing.T, bin, kubeconfig string, drain time.Duration) *manager {
	t.Helper()
	m := &manager{api: freeAddr(t), probes: freeAddr(t), key: testKey, log: &bytes.Buffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(bin,
		"--api-bind-address="+m.api,
		"--health-probe-bind-address="+m.probes,
		"--aggregated-api-bind-address=127.0.0.1:0",
		"--executor=inprocess",
		"--store-driver=sqlite",
		"--store-dsn="+filepath.Join(t.TempDir(), "posture.db"),
		"--static-tenant=demo",
		"--shutdown-drain="+drain.String(),
	)
	m.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POSTURE_STATIC_API_KEY="+testKey, "POD_NAMESPACE=default")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() {
		if m.cmd.ProcessState == nil {
			_ = m.cmd.Process.Kill()
			<-m.done
		}
		if t.Failed() {
			t.Logf("manager output:\n%s", m.log)
		}
	})
	testenv.Eventually(t, 60*time.Second, "the manager to be ready", func() (bool, string) {
		if code := readyz(m.probes); code == http.StatusOK {
			return true, ""
		}
		select {
		case err := <-m.done:
			m.done <- err
			t.Fatalf("the manager exited before it was ready: %v", err)
		default:
		}
		return false, "/readyz not OK"
	})
	return m
}

func readyz(addr string) int {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (m *manager) terminate(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// waitUnready waits for /readyz to answer with a failure (controller-
// runtime says 500): the probe server outlives the API's drain, so the
// kubelet sees the replica leave while the API still finishes its work.
func (m *manager) waitUnready(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "/readyz to fail after SIGTERM", func() (bool, string) {
		code := readyz(m.probes)
		return code >= 400, fmt.Sprintf("last answer %d (0: no answer)", code)
	})
}

func (m *manager) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-m.done:
		if err != nil {
			t.Fatalf("the manager exited with %v", err)
		}
	case <-time.After(within):
		t.Fatalf("the manager still ran %v after SIGTERM", within)
	}
}

// upload is a request whose body is sent in two halves, with a pause
// between them during which the test acts on the server.
type upload struct {
	conn net.Conn
	rest []byte
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func startUpload(t *testing.T, m *manager, report []byte) *upload {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="slow.ocsf.json"`)
	w, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(report)
	_ = mw.Close()
	conn, err := net.Dial("tcp", m.api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	half := body.Len() / 2
	fmt.Fprintf(conn, "POST /api/v1/ingestions HTTP/1.1\r\nHost: %s\r\nAuthorization: Api-Key %s\r\nAccept: application/vnd.api+json\r\n"+
		"Content-Type: %s\r\nContent-Length: %d\r\n\r\n", m.api, m.key, mw.FormDataContentType(), body.Len())
	if _, err := conn.Write(body.Bytes()[:half]); err != nil {
		t.Fatal(err)
	}
	// The server must be reading this request before the signal, or it would
	// be a new request refused, not one in flight.
	time.Sleep(300 * time.Millisecond)
	return &upload{conn: conn, rest: body.Bytes()[half:]}
}

func (u *upload) finish(t *testing.T) {
	t.Helper()
	if _, err := u.conn.Write(u.rest); err != nil {
		t.Fatalf("sending the rest of the upload: %v", err)
	}
}

func (u *upload) response(t *testing.T, within time.Duration) reply {
	t.Helper()
	_ = u.conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(u.conn), nil)
	if err != nil {
		t.Fatalf("no answer to the upload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: bytes.TrimSpace(b)}
}
