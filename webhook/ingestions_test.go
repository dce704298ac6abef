package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

func TestMain(m *testing.M) {
	// A fuzzing run executes FuzzUpload alone, which needs no control plane
	// (see its comment); starting one in every fuzz worker would only cost.
	if fuzzing() {
		os.Exit(m.Run())
	}
	apitest.Main(m)
}

func fuzzing() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.fuzzworker" || strings.HasPrefix(a, "-test.fuzz=") && a != "-test.fuzz=" {
			return true
		}
	}
	return false
}

type jobDoc struct {
	Data struct {
		Type       string `json:"type"`
		ID         string `json:"id"`
		Attributes struct {
			Status  string `json:"status"`
			Summary struct {
				Total, Processed, Invalid int
			} `json:"summary"`
			RequestedAt *string `json:"requested_at"`
			StartedAt   *string `json:"started_at"`
			CompletedAt *string `json:"completed_at"`
		} `json:"attributes"`
	} `json:"data"`
	Meta struct {
		Version string `json:"version"`
	} `json:"meta"`
}

func uploadFile(t *testing.T, env *apitest.Env, name string, content []byte) (*http.Response, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(content)
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/api/v1/ingestions", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", env.Authorization())
	req.Header.Set("Accept", "application/vnd.api+json")
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func getJob(t *testing.T, env *apitest.Env, id string) jobDoc {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/ingestions/"+id, nil)
	req.Header.Set("Authorization", env.Authorization())
	resp, b := do(t, req)
	if resp.StatusCode != 200 {
		t.Fatalf("GET job: %d %s", resp.StatusCode, b)
	}
	var d jobDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The foundation's acceptance path: upload the 1500-record report, get a
// pending job with the counted total, watch it complete.
func TestUploadThenComplete(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	content, err := os.ReadFile(testenv.Fixture("aws_1500_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, b := uploadFile(t, env, "aws_1500_records.ocsf.json", content)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.api+json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var d jobDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	a := d.Data.Attributes
	if d.Data.Type != "ingestions" || d.Meta.Version != "v1" || a.Status != "pending" ||
		a.Summary.Total != 1500 || a.Summary.Processed != 0 || a.Summary.Invalid != 0 ||
		a.StartedAt != nil || a.CompletedAt != nil || a.RequestedAt == nil {
		t.Fatalf("202 body = %s", b)
	}
	if _, err := time.Parse(time.RFC3339, *a.RequestedAt); err != nil {
		t.Errorf("requested_at %q is not ISO 8601: %v", *a.RequestedAt, err)
	}

	var got jobDoc
	testenv.Eventually(t, 60*time.Second, "the job to end", func() (bool, string) {
		got = getJob(t, env, d.Data.ID)
		return restapi.Terminal(got.Data.Attributes.Status), fmt.Sprintf("%+v", got.Data.Attributes)
	})
	ga := got.Data.Attributes
	if ga.Status != "completed" || ga.Summary.Processed != 1500 || ga.Summary.Invalid != 0 || ga.StartedAt == nil || ga.CompletedAt == nil {
		t.Fatalf("job ended as %+v, want completed 1500/0", ga)
	}
}
