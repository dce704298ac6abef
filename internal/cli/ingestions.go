package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/termsafe"
)

type outputFlag struct{ format string }

func (o *outputFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "table", "output format: table or json (the API's JSON:API document)")
}

func (o *outputFlag) check() error {
	if o.format != "table" && o.format != "json" {
		return usageError{fmt.Errorf("-o/--output must be table or json, not %q", o.format)}
	}
	return nil
}

func (a *app) ingestionsCommand() *cobra.Command {
	var apiURL string
	cmd := &cobra.Command{
		Use:     "ingestions",
		Aliases: []string{"ingestion"},
		Short:   "List and follow ingestion jobs",
		Long: `Reads ingestion jobs from the API: ` + EnvAPIURL + ` (address) and ` + EnvAPIKey + ` (API key), or
` + EnvToken + ` (a JWT from postctl token); SERVICE_CLOUD_API_BASE_URL and SERVICE_CLOUD_API_KEY
are accepted as fallbacks.`,
		Args: args(0, ""),
		RunE: func(*cobra.Command, []string) error {
			return usageError{errors.New("ingestions needs a subcommand: list, get, errors or wait")}
		},
	}
	cmd.PersistentFlags().StringVar(&apiURL, "api-url", "", "API address (default: $"+EnvAPIURL+")")
	client := func() (*apiClient, error) { return a.newAPIClient(apiURL, true) }
	cmd.AddCommand(a.listCommand(client), a.getCommand(client), a.errorsCommand(client), a.waitCommand(client))
	return cmd
}

func (a *app) listCommand(client func() (*apiClient, error)) *cobra.Command {
	var out outputFlag
	var status, search, sort string
	var page, size int
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's ingestion jobs, newest first",
		Args:  args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if status != "" {
				if strings.Contains(status, ",") {
					q.Set("filter[status__in]", status)
				} else {
					q.Set("filter[status]", status)
				}
			}
			if search != "" {
				q.Set("filter[search]", search)
			}
			if sort != "" {
				q.Set("sort", sort)
			}
			items, raw, pg, err := fetchPages[restapi.Ingestion](cmd.Context(), c, restapi.PathIngestions, q, page, size, all)
			if err != nil {
				return err
			}
			if out.format == "json" {
				return a.printJSON(raw)
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tTOTAL\tPROCESSED\tINVALID\tREQUESTED\tCOMPLETED")
			for _, i := range items {
				s := i.Attributes.Summary
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", termsafe.String(i.ID), termsafe.String(i.Attributes.Status), s.Total, s.Processed, s.Invalid,
					deref(i.Attributes.RequestedAt), deref(i.Attributes.CompletedAt))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			a.pageFooter(pg, len(items), all, "jobs")
			return nil
		},
	}
	out.register(cmd)
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only jobs in this status (pending, processing, completed, failed; comma-separated for several)")
	f.StringVar(&search, "search", "", "only jobs whose id, file name or status contains this")
	f.StringVar(&sort, "sort", "", "sort keys: inserted_at, requested_at, started_at, completed_at; '-' prefix for descending (default -inserted_at)")
	f.IntVar(&page, "page", 1, "page number")
	f.IntVar(&size, "page-size", 10, "jobs per page (at most 100)")
	f.BoolVar(&all, "all", false, "fetch every page")
	return cmd
}

func (a *app) getCommand(client func() (*apiClient, error)) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show one ingestion job",
		Args:  args(1, "an ingestion job id"),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			job, raw, err := getIngestion(cmd.Context(), c, ids[0])
			if err != nil {
				return err
			}
			if out.format == "json" {
				return a.printJSON(raw)
			}
			a.printJob(job)
			return nil
		},
	}
	out.register(cmd)
	return cmd
}

func (a *app) errorsCommand(client func() (*apiClient, error)) *cobra.Command {
	var out outputFlag
	var page, size int
	var all bool
	cmd := &cobra.Command{
		Use:   "errors ID",
		Short: "Show why records of an ingestion job were rejected",
		Args:  args(1, "an ingestion job id"),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			seg, err := restapi.IDSegment(ids[0])
			if err != nil {
				return usageError{fmt.Errorf("ingestion id: %w", err)}
			}
			rows, raw, pg, err := fetchPages[restapi.IngestionError](cmd.Context(), c, restapi.PathIngestions+"/"+seg+"/errors", url.Values{}, page, size, all)
			if err != nil {
				return err
			}
			if out.format == "json" {
				return a.printJSON(raw)
			}
			if len(rows) == 0 && pg.Count == 0 {
				fmt.Fprintf(a.stdout, "Ingestion %s has no errors.\n", ids[0])
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "RECORD\tCODE\tPOINTER\tFINDING UID\tDETAIL")
			for _, e := range rows {
				rec := "(job)"
				if e.Attributes.RecordIndex != nil {
					rec = strconv.FormatInt(*e.Attributes.RecordIndex, 10)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", rec, termsafe.String(e.Attributes.Code), termsafe.String(orDash(e.Attributes.Pointer)),
					termsafe.String(orDash(e.Attributes.FindingUID)), termsafe.String(oneLine(e.Attributes.Detail)))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			a.pageFooter(pg, len(rows), all, "errors")
			return nil
		},
	}
	out.register(cmd)
	f := cmd.Flags()
	f.IntVar(&page, "page", 1, "page number")
	f.IntVar(&size, "page-size", 100, "errors per page (at most 100)")
	f.BoolVar(&all, "all", false, "fetch every page")
	return cmd
}

func (a *app) waitCommand(client func() (*apiClient, error)) *cobra.Command {
	var out outputFlag
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Follow an ingestion job until it completes or fails",
		Long: `Polls the job and shows its progress: a progress bar of processed/total records on a
terminal, one line per change otherwise. Exit code 0 when the job completes, 4 when it
fails (postctl ingestions errors ID tells why), 1 when waiting itself fails.`,
		Args: args(1, "an ingestion job id"),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if interval <= 0 {
				return usageError{errors.New("--interval must be positive")}
			}
			c, err := client()
			if err != nil {
				return err
			}
			return a.wait(cmd.Context(), c, ids[0], interval, timeout, out.format == "json")
		},
	}
	out.register(cmd)
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between two status checks")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0: never); the job itself keeps running")
	return cmd
}

type ingestion = restapi.Resource[restapi.Ingestion]

func getIngestion(ctx context.Context, c *apiClient, id string) (ingestion, []byte, error) {
	seg, err := restapi.IDSegment(id)
	if err != nil {
		return ingestion{}, nil, usageError{fmt.Errorf("ingestion id: %w", err)}
	}
	var doc restapi.ResourceDocument[restapi.Ingestion]
	raw, err := c.do(ctx, "GET", restapi.PathIngestions+"/"+seg, nil, nil, &doc)
	return doc.Data, raw, err
}

// fetchPages reads one page, or all of them; raw is the API's document (for
// several pages: their data concatenated, with the last page's meta).
func fetchPages[A any](ctx context.Context, c *apiClient, path string, q url.Values, page, size int, all bool) ([]restapi.Resource[A], []byte, restapi.Pagination, error) {
	if page < 1 {
		return nil, nil, restapi.Pagination{}, usageError{fmt.Errorf("--page must be at least 1, not %d", page)}
	}
	if size < 1 || size > restapi.MaxPageSize {
		return nil, nil, restapi.Pagination{}, usageError{fmt.Errorf("--page-size must be between 1 and %d, not %d", restapi.MaxPageSize, size)}
	}
	if all {
		page, size = 1, restapi.MaxPageSize
	}
	type rawPage struct {
		Data []json.RawMessage `json:"data"`
		Meta restapi.Meta      `json:"meta"`
	}
	var items []restapi.Resource[A]
	var rawData []json.RawMessage
	var last rawPage
	var raw []byte
	for {
		q.Set("page[number]", strconv.Itoa(page))
		q.Set("page[size]", strconv.Itoa(size))
		var doc rawPage
		b, err := c.do(ctx, "GET", path, q, nil, &doc)
		if err != nil {
			return nil, nil, restapi.Pagination{}, err
		}
		if doc.Meta.Pagination == nil {
			doc.Meta.Pagination = &restapi.Pagination{}
		}
		for _, d := range doc.Data {
			var v restapi.Resource[A]
			if err := json.Unmarshal(d, &v); err != nil {
				return nil, nil, restapi.Pagination{}, fmt.Errorf("unexpected item in %s: %w", path, err)
			}
			items = append(items, v)
		}
		rawData = append(rawData, doc.Data...)
		last, raw = doc, b
		if !all || page >= doc.Meta.Pagination.Pages {
			break
		}
		page++
	}
	if all {
		merged := map[string]any{"data": nonNilRaw(rawData), "meta": last.Meta}
		b, err := json.Marshal(merged)
		if err != nil {
			return nil, nil, restapi.Pagination{}, err
		}
		raw = b
	}
	return items, raw, *last.Meta.Pagination, nil
}

func nonNilRaw(r []json.RawMessage) []json.RawMessage {
	if r == nil {
		return []json.RawMessage{}
	}
	return r
}

func (a *app) pageFooter(pg restapi.Pagination, shown int, all bool, noun string) {
	switch {
	case all || pg.Pages <= 1:
		fmt.Fprintf(a.stdout, "%d %s.\n", shown, noun)
	default:
		fmt.Fprintf(a.stdout, "Page %d of %d (%d %s in all; --page N or --all for more).\n", pg.Page, pg.Pages, pg.Count, noun)
	}
}

func (a *app) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("the API's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := a.stdout.Write(buf.Bytes())
	return err
}

func (a *app) printJob(job ingestion) {
	s := job.Attributes.Summary
	w := tabwriter.NewWriter(a.stdout, 0, 4, 1, ' ', 0)
	fmt.Fprintf(w, "ID:\t%s\n", termsafe.String(job.ID))
	fmt.Fprintf(w, "Status:\t%s\n", termsafe.String(job.Attributes.Status))
	fmt.Fprintf(w, "Records:\t%d total, %d processed, %d invalid\n", s.Total, s.Processed, s.Invalid)
	fmt.Fprintf(w, "Requested at:\t%s\n", deref(job.Attributes.RequestedAt))
	fmt.Fprintf(w, "Started at:\t%s\n", deref(job.Attributes.StartedAt))
	fmt.Fprintf(w, "Completed at:\t%s\n", deref(job.Attributes.CompletedAt))
	_ = w.Flush()
	if s.Invalid > 0 || job.Attributes.Status == restapi.IngestionFailed {
		fmt.Fprintf(a.stdout, "Why records were rejected: postctl ingestions errors %s\n", job.ID)
	}
}

// wait polls until the job ends. Polling is reading, so a transient failure
// (network, 5xx, 429) is retried a few times before giving up; a 4xx is not.
func (a *app) wait(ctx context.Context, c *apiClient, id string, interval, timeout time.Duration, asJSON bool) error {
	bar := newProgress(a.stdout, asJSON)
	failures := 0
	var last ingestion
	ended, err := follow(ctx, interval, timeout, func(ctx context.Context) (bool, error) {
		job, raw, err := getIngestion(ctx, c, id)
		switch {
		case err == nil:
			failures = 0
			last = job
			bar.update(job)
			if !job.Attributes.Done() {
				return false, nil
			}
			bar.finish()
			if asJSON {
				if err := a.printJSON(raw); err != nil {
					return true, err
				}
			} else {
				a.printJob(job)
			}
			if job.Attributes.Status == restapi.IngestionFailed {
				return true, exit(ExitJobFailed, "ingestion %s failed; postctl ingestions errors %s tells why", id, id)
			}
			return true, nil
		case ctx.Err() != nil:
			return false, nil
		case restapi.Transient(err) && failures < 3:
			failures++
			fmt.Fprintf(a.stderr, "warning: checking ingestion %s failed (attempt %d of 4), trying again: %v\n", id, failures, err)
			return false, nil
		}
		bar.finish()
		return false, err
	})
	if ended {
		bar.finish()
		if errors.Is(err, context.DeadlineExceeded) && timeout > 0 {
			return exit(ExitError, "gave up waiting for ingestion %s after %s; it was %s (%d/%d processed) and keeps running on the server",
				id, timeout, orDash(last.Attributes.Status), last.Attributes.Summary.Processed, last.Attributes.Summary.Total)
		}
	}
	return err
}

// follow is both commands' wait for an ingestion: it calls check every
// interval until check says the ingestion is done or fails, or until ctx
// ends or timeout (0: none) passes, which ended reports.
func follow(ctx context.Context, interval, timeout time.Duration, check func(context.Context) (done bool, err error)) (ended bool, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		if done, err := check(ctx); done || err != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// progress shows a job's progress: a bar redrawn in place on a terminal,
// a line per change elsewhere (logs, CI), nothing for -o json.
type progress struct {
	w        io.Writer
	terminal bool
	quiet    bool
	last     string
	drawn    bool
}

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.terminal = true
	}
	return p
}

func (p *progress) update(job ingestion) {
	if p.quiet {
		return
	}
	s := job.Attributes.Summary
	line := fmt.Sprintf("%s %d/%d processed, %d invalid", job.Attributes.Status, s.Processed, s.Total, s.Invalid)
	if p.terminal {
		fmt.Fprintf(p.w, "\r\x1b[K%s %3d%% %s", bar(s.Processed, s.Total, 30), percent(s.Processed, s.Total), line)
		p.drawn = true
		return
	}
	if line != p.last {
		fmt.Fprintf(p.w, "%s ingestion %s: %s\n", time.Now().UTC().Format(time.RFC3339), job.ID, line)
		p.last = line
	}
}

func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func percent(done, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return min(100, done*100/total)
}

func bar(done, total int64, width int) string {
	filled := int(percent(done, total)) * width / 100
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", width-filled) + "]"
}

func deref(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return termsafe.String(*s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
