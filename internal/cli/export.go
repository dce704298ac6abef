package cli

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/internal/restapi"
)

// exportFlags are what both export commands take.
type exportFlags struct {
	format  string
	history bool
	file    string
}

func (e *exportFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.format, "format", "csv", "csv (fixed columns, docs/api.md) or ocsf (the records as uploaded, a JSON array an upload takes back)")
	f.BoolVar(&e.history, "history", false, "export every finding stored, not only the current state")
	f.StringVar(&e.file, "output-file", "", "write the export to this file (kept only once whole) instead of standard output")
}

func (e *exportFlags) check() (export.Format, error) {
	f, err := export.ParseFormat(e.format)
	if err != nil {
		return "", usageError{fmt.Errorf("--format: %w", err)}
	}
	return f, nil
}

// output is where an export is written: standard output, or a file that
// appears under its name only once the export is whole. A failed export
// leaves no file that could pass for a complete one.
type output struct {
	io.Writer
	tmp  *os.File
	name string
}

func (a *app) openOutput(name string) (*output, error) {
	if name == "" || name == "-" {
		return &output{Writer: a.stdout}, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".partial-*")
	if err != nil {
		return nil, exit(ExitError, "cannot write the export next to %s: %v", name, err)
	}
	return &output{Writer: tmp, tmp: tmp, name: name}, nil
}

// finish keeps the file when err is nil and removes it otherwise.
func (o *output) finish(err error) error {
	if o.tmp == nil {
		return err
	}
	cerr := o.tmp.Close()
	if err == nil && cerr == nil {
		if err = os.Rename(o.tmp.Name(), o.name); err == nil {
			return nil
		}
	}
	_ = os.Remove(o.tmp.Name())
	return errors.Join(err, cerr)
}

func (a *app) exportCommand() *cobra.Command {
	var e exportFlags
	var apiURL, sort string
	var filters []string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export the tenant's findings as CSV or OCSF JSON",
		Long: `Streams every finding of the current state (GET /api/v1/findings/latest/export), or with --history
of the whole history (GET /api/v1/findings/export), that the filters keep, in the order of --sort, to
standard output or --output-file. The API's filter[...] parameters are given as --filter NAME=VALUE
(severity=high, status_code__in=FAIL,MANUAL, delta=new, search=s3, ...; docs/api.md lists them).
A transfer the server cuts short (a failure after the export began) is an error, exit 1, and leaves
no --output-file behind. Credentials and address as for ingestions: ` + EnvAPIURL + `, ` + EnvAPIKey + ` or ` + EnvToken + `.`,
		Example: `  postctl export --filter status_code=FAIL --filter severity__in=critical,high > failing.csv
  postctl export --history --format ocsf --output-file all.ocsf.json`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := e.check()
			if err != nil {
				return err
			}
			q := url.Values{"format": {string(format)}}
			for _, f := range filters {
				name, value, ok := strings.Cut(f, "=")
				if !ok || name == "" {
					return usageError{fmt.Errorf("--filter %q: want NAME=VALUE, e.g. severity=high", f)}
				}
				if q.Has("filter[" + name + "]") {
					return usageError{fmt.Errorf("--filter %s is given twice; a filter has one value (use %s__in=a,b for several)", name, name)}
				}
				q.Set("filter["+name+"]", value)
			}
			if sort != "" {
				q.Set("sort", sort)
			}
			c, err := a.newAPIClient(apiURL, true)
			if err != nil {
				return err
			}
			path := restapi.PathLatestFindings + "/export"
			if e.history {
				path = restapi.PathFindings + "/export"
			}
			out, err := a.openOutput(e.file)
			if err != nil {
				return err
			}
			return out.finish(a.download(cmd, c, path, q, format, out))
		},
	}
	e.register(cmd)
	cmd.Flags().StringVar(&apiURL, "api-url", "", "API address (default: $"+EnvAPIURL+")")
	cmd.Flags().StringArrayVar(&filters, "filter", nil, "a filter of the list, NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&sort, "sort", "", "sort keys: time, severity_id, inserted_at, check_id, uid; '-' prefix for descending (default -inserted_at)")
	return cmd
}

// download streams one export into out.
func (a *app) download(cmd *cobra.Command, c *apiClient, path string, q url.Values, format export.Format, out io.Writer) error {
	mediaType, _, _ := strings.Cut(format.MediaType(), ";")
	resp, err := c.Open(cmd.Context(), restapi.Call{Method: "GET", Path: path, Query: q}, mediaType)
	if err != nil {
		var fail *restapi.Error
		if errors.As(err, &fail) && fail.Status != 0 && fail.Cause == nil {
			ae := &apiError{Status: fail.Status, Detail: fail.Detail(), cause: fail}
			if fail.Status == 401 && c.authVar != "" {
				ae.hint = "Verify " + c.authVar + " (it may be wrong, revoked or expired)"
			}
			return exit(ExitError, "export from %s: %v", fail.Endpoint(), ae)
		}
		return exit(ExitError, "export: cannot reach the API at %s (from %s): %v", c.Base(), c.baseVar, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(out, resp.Body)
	if err != nil {
		return exit(ExitError, "the export was cut short after %d bytes (%v): the server failed during the transfer, or the connection broke; "+
			"what was received is incomplete, run the export again", n, err)
	}
	return nil
}
