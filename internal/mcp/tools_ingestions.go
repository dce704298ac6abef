package mcp

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/restapi"
)

// waitIngestion reads a job, polling until it is terminal or wait runs out.
func (c *caller) waitIngestion(ctx context.Context, id string, waitSeconds int) (map[string]any, error) {
	deadline := time.Now().Add(time.Duration(min(max(waitSeconds, 0), 120)) * time.Second)
	for {
		ing, err := c.one(ctx, "/ingestions/"+id, nil)
		if err != nil {
			return nil, err
		}
		status, _ := ing["status"].(string)
		terminal := restapi.Terminal(status)
		if terminal || !time.Now().Before(deadline) {
			if !terminal && waitSeconds > 0 {
				ing["note"] = fmt.Sprintf("still %s after waiting %d s; call get_ingestion again", status, waitSeconds)
			}
			if status == restapi.IngestionFailed || hasInvalid(ing) {
				ing["errors_hint"] = "list_ingestion_errors with this id explains the rejected records"
			}
			return ing, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func hasInvalid(ing map[string]any) bool {
	sum, _ := ing["summary"].(map[string]any)
	n, _ := sum["invalid"].(float64)
	return n > 0
}

func (s *Server) uploadReport(ctx context.Context, c *caller, in uploadReportIn) (any, error) {
	var body io.Reader
	name := strings.TrimSpace(in.Filename)
	switch {
	case in.Content != "" && in.Path != "":
		return nil, fmt.Errorf("give either content or path, not both")
	case in.Path != "":
		if !s.cfg.LocalFiles {
			return nil, fmt.Errorf("path is only accepted by a local STDIO server; over HTTP pass the report as content")
		}
		f, err := os.Open(in.Path)
		if err != nil {
			return nil, fmt.Errorf("cannot read the report: %v", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, fmt.Errorf("%s is a directory; give the path of a .ocsf.json file", in.Path)
		}
		body = f
		if name == "" {
			name = filepath.Base(in.Path)
		}
	case in.Content != "":
		if name == "" {
			return nil, fmt.Errorf("filename is required with content; it must end in .ocsf.json, e.g. report.ocsf.json")
		}
		body = strings.NewReader(in.Content)
	default:
		if s.cfg.LocalFiles {
			return nil, fmt.Errorf("give the report as content (its JSON text) or path (a file on this machine)")
		}
		return nil, fmt.Errorf("give the report as content: the JSON text of a .ocsf.json file")
	}
	// The API decides what it accepts (name, format, size) and says why not;
	// checking the suffix here too only saves a round trip with a clear word.
	if !strings.HasSuffix(name, ".ocsf.json") {
		return nil, fmt.Errorf("file name %q must end in .ocsf.json", name)
	}
	doc, err := s.api.upload(ctx, c.authz, name, body)
	if err != nil {
		return nil, err
	}
	r, err := restapi.One[map[string]any](doc)
	if err != nil {
		return nil, err
	}
	if in.WaitSeconds > 0 {
		return c.waitIngestion(ctx, url.PathEscape(r.ID), in.WaitSeconds)
	}
	ing := flatten(r)
	ing["next"] = "call get_ingestion with this id (wait_seconds to wait) until status is completed or failed"
	return ing, nil
}
