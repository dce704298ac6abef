package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/internal/pushclient"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// restExport reads an export straight from the REST API, what the CLIs'
// files are compared with.
func restExport(t *testing.T, env *apitest.Env, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.URL+"/api/v1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", env.Authorization())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %.300s", path, resp.StatusCode, err, body)
	}
	return body
}

// csvRows parses a CSV export, checking its header.
func csvRows(t *testing.T, data []byte, cols []string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v", err)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], cols) {
		t.Fatalf("CSV header %q, want %q", rows[:min(len(rows), 1)], cols)
	}
	return rows[1:]
}

// recordUIDs parses an OCSF export and returns its records' uids.
func recordUIDs(t *testing.T, data []byte) []string {
	t.Helper()
	var recs []struct {
		FindingInfo struct {
			UID string `json:"uid"`
		} `json:"finding_info"`
	}
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatalf("the OCSF export does not parse: %v", err)
	}
	uids := make([]string, len(recs))
	for i, r := range recs {
		uids[i] = r.FindingInfo.UID
	}
	return uids
}

// failingReads fails every listing once armed, as a database gone away
// in the middle of an export.
type failingReads struct {
	apiStore
	armed atomic.Int64 // listings left before the failure; < 0: never
}

type apiStore interface {
	store.FindingReads
	store.IngestionErrors
	store.Blobs
}

func (f *failingReads) ListFindings(ctx context.Context, tenant string, q store.FindingQuery) ([]store.Finding, int, error) {
	if f.armed.Load() >= 0 && f.armed.Add(-1) < 0 {
		return nil, 0, errors.New("the database went away")
	}
	return f.apiStore.ListFindings(ctx, tenant, q)
}

// TestExportCommand: postctl export writes the REST export, to standard
// output or a file, with the list's filters; its OCSF file is ingested
// again as it is; a transfer cut short is an error that leaves no file.
func TestExportCommand(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	api := envWith(EnvAPIURL, env.URL, EnvAPIKey, env.APIKey)
	res := run(t, envWith(pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL), "push", testenv.Fixture("aws_1500_records.ocsf.json"))
	if res.code != ExitOK {
		t.Fatalf("push: %s", res)
	}
	if res = run(t, api, "ingestions", "wait", jobRE.FindStringSubmatch(res.stdout)[1], "--interval", "100ms"); res.code != ExitOK {
		t.Fatalf("wait: %s", res)
	}

	t.Run("the current state as CSV on standard output", func(t *testing.T) {
		res := run(t, api, "export")
		if res.code != ExitOK {
			t.Fatalf("%s", res)
		}
		want := restExport(t, env, "/findings/latest/export?format=csv")
		if res.stdout != string(want) {
			t.Fatalf("postctl export wrote %d bytes, the REST export is %d", len(res.stdout), len(want))
		}
		if rows := csvRows(t, []byte(res.stdout), export.CurrentColumns); len(rows) == 0 {
			t.Fatal("no finding exported")
		}
	})

	t.Run("filters and sort", func(t *testing.T) {
		res := run(t, api, "export", "--history", "--filter", "severity=high", "--filter", "status_code__in=FAIL,MANUAL", "--sort", "uid")
		if res.code != ExitOK {
			t.Fatalf("%s", res)
		}
		rows := csvRows(t, []byte(res.stdout), export.Columns)
		if len(rows) == 0 {
			t.Fatal("no high failure exported: the test would prove nothing")
		}
		for i, r := range rows {
			if r[3] != "high" || (r[5] != "FAIL" && r[5] != "MANUAL") || (i > 0 && r[1] < rows[i-1][1]) {
				t.Fatalf("row %d = %q: not a high failure in uid order", i+1, r)
			}
		}
	})

	var file string
	t.Run("the history as OCSF into a file, which an upload takes back", func(t *testing.T) {
		file = filepath.Join(t.TempDir(), "all.ocsf.json")
		res := run(t, api, "export", "--history", "--format", "ocsf", "--output-file", file)
		if res.code != ExitOK || res.stdout != "" {
			t.Fatalf("%s", res)
		}
		data := readFile(t, file)
		uids := recordUIDs(t, []byte(data))
		if want := recordUIDs(t, restExport(t, env, "/findings/export?format=ocsf")); !slices.Equal(uids, want) || len(uids) < 1500 {
			t.Fatalf("the file holds %d records, the REST export %d", len(uids), len(want))
		}
		res = run(t, envWith(pushclient.EnvAPIKey, env.APIKey, pushclient.EnvBaseURL, env.URL), "push", file)
		if res.code != ExitOK {
			t.Fatalf("push of the export: %s", res)
		}
		job := jobRE.FindStringSubmatch(res.stdout)[1]
		if res = run(t, api, "ingestions", "wait", job, "--interval", "100ms"); res.code != ExitOK {
			t.Fatalf("the export's ingestion: %s", res)
		}
		if v := getJSON(t, api, job); v.Summary.Processed != int64(len(uids)) || v.Summary.Invalid != 0 {
			t.Fatalf("the export's ingestion: %+v; want its %d records valid", v.Summary, len(uids))
		}
	})

	t.Run("a transfer cut short is an error and leaves no file", func(t *testing.T) {
		failing := &failingReads{apiStore: env.Server.Store}
		failing.armed.Store(1) // the first page is read, the second fails
		env.Server.Store = failing
		defer func() { env.Server.Store = failing.apiStore }()
		dir := t.TempDir()
		res := run(t, api, "export", "--history", "--output-file", filepath.Join(dir, "cut.csv"))
		if res.code != ExitError || !strings.Contains(res.stderr, "the export was cut short after") {
			t.Fatalf("%s", res)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("a failed export left %v", names)
		}
		// On standard output, what arrived is there, and the exit code says
		// it is not all.
		failing.armed.Store(1)
		res = run(t, api, "export", "--history")
		if res.code != ExitError || !strings.Contains(res.stderr, "incomplete") || !strings.HasPrefix(res.stdout, strings.Join(export.Columns, ",")) {
			t.Fatalf("%s", res)
		}
	})

	t.Run("usage and API errors", func(t *testing.T) {
		for _, tc := range []struct {
			env  []string
			args []string
			code int
			want string
		}{
			{api, []string{"export", "--format", "xml"}, ExitUsage, `unknown export format "xml"`},
			{api, []string{"export", "--filter", "severity"}, ExitUsage, "want NAME=VALUE"},
			{api, []string{"export", "--filter", "severity=bogus"}, ExitError, `HTTP 400 Bad Request: unknown severity "bogus"`},
			{api, []string{"export", "--history", "--filter", "delta=new"}, ExitError, `unknown filter "delta"`},
			{envWith(EnvAPIURL, env.URL), []string{"export"}, ExitError, "no credentials"},
			{envWith(EnvAPIURL, env.URL, EnvAPIKey, apitest.NewKey()), []string{"export"}, ExitError, "Verify " + EnvAPIKey},
		} {
			res := run(t, tc.env, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("postctl %s: want exit %d and %q: %s", strings.Join(tc.args, " "), tc.code, tc.want, res)
			}
		}
	})
}
