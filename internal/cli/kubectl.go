package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/scanner"
	"github.com/posture-dev/posture/internal/termsafe"
)

// Paths of the two API groups the plugin speaks to. Ingestions are
// posture.dev custom resources; uploads, findings, scans and ingestion errors
// are served by the aggregated API data.posture.dev.
const (
	postureGroupPath = "/apis/posture.dev/v1alpha1"
	dataGroupPath    = "/apis/data.posture.dev/v1alpha1"
	// ingestionErrorsField is the ingestionerrors field selector naming the
	// ingestion.
	ingestionErrorsField = "ingestion"
	// tableAccept asks for the server-side table kubectl prints, falling
	// back to the plain list.
	tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
)

// RunKubectl runs kubectl-posture, the kubectl plugin (`kubectl posture …`),
// with args (without the program name). It reaches the cluster with the
// kubeconfig's identity, as kubectl does, through the aggregated API.
func RunKubectl(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	a := &app{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: func(k string) string { return vars[k] }}
	k := &kubectlPlugin{app: a}
	root := k.command()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	return exitCode(err, "kubectl posture", k.ran, stderr)
}

// kubectlPlugin holds the kubeconfig flags every subcommand shares.
type kubectlPlugin struct {
	*app
	ran        bool
	loading    *clientcmd.ClientConfigLoadingRules
	overrides  clientcmd.ConfigOverrides
	kubeconfig clientcmd.ClientConfig
}

func (k *kubectlPlugin) command() *cobra.Command {
	root := &cobra.Command{
		// Cobra names a command by the first word of Use; kubectl runs the
		// plugin as "kubectl posture", which is how its help must read.
		Use:         "posture",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl posture"},
		Short:       "Upload reports to Posture and read findings through the Kubernetes API",
		Long: `kubectl posture uploads OCSF reports and reads ingestions, findings and ingestion
errors through kube-apiserver (the aggregated API data.posture.dev), as the identity of
the current kubeconfig context: Kubernetes RBAC decides what it may do. The kubeconfig
flags (--kubeconfig, --context, -n, --as, --as-group, …) work as in kubectl.
docs/kubernetes-api.md describes the API and the RBAC it needs.`,
		Version:       scanner.ProductVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			k.ran = true
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	k.bindKubeconfigFlags(root.PersistentFlags())
	root.AddCommand(k.pushCommand(), k.getCommand(), k.waitCommand(), k.errorsCommand(), k.exportCommand())
	return root
}

// bindKubeconfigFlags registers kubectl's connection flags. $KUBECONFIG is
// read from the environment Run was given, so tests and callers control it.
func (k *kubectlPlugin) bindKubeconfigFlags(fs *pflag.FlagSet) {
	k.loading = clientcmd.NewDefaultClientConfigLoadingRules()
	if v := k.getenv("KUBECONFIG"); v != "" {
		k.loading.Precedence = filepath.SplitList(v)
	} else if home := k.getenv("HOME"); home != "" {
		k.loading.Precedence = []string{filepath.Join(home, ".kube", "config")}
	}
	fs.StringVar(&k.loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	clientcmd.BindOverrideFlags(&k.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	k.kubeconfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.loading, &k.overrides)
}

// kube is an HTTP client carrying the kubeconfig's identity (certificates,
// tokens, exec plugins, impersonation) and the namespace to use.
type kube struct {
	http      *http.Client
	host      string
	namespace string
}

func (k *kubectlPlugin) client() (*kube, error) {
	cfg, err := k.kubeconfig.ClientConfig()
	if err != nil {
		return nil, exit(ExitError, "kubeconfig: %v", err)
	}
	ns, _, err := k.kubeconfig.Namespace()
	if err != nil {
		return nil, exit(ExitError, "kubeconfig: %v", err)
	}
	c, err := newKube(cfg, ns)
	if err != nil {
		return nil, exit(ExitError, "kubeconfig: %v", err)
	}
	return c, nil
}

// newKube is a client of cfg's cluster (its identity: certificates, tokens,
// exec plugins, impersonation) for requests in namespace.
func newKube(cfg *rest.Config, namespace string) (*kube, error) {
	// Uploads stream up to a gigabyte: no whole-request timeout unless
	// --request-timeout asks for one.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	host, err := url.Parse(cfg.Host)
	if err != nil || host.Host == "" {
		return nil, fmt.Errorf("server %q is not a URL", cfg.Host)
	}
	if host.Scheme == "" {
		host.Scheme = "https"
	}
	return &kube{http: hc, host: strings.TrimRight(host.String()+cfg.APIPath, "/"), namespace: namespace}, nil
}

// upload streams a report to the aggregated API (create uploads in the
// client's namespace) and returns the Ingestion it created.
func (c *kube) upload(ctx context.Context, name string, body io.Reader, size int64) (postureIngestion, error) {
	path := dataGroupPath + "/namespaces/" + url.PathEscape(c.namespace) + "/uploads"
	data, err := c.do(ctx, http.MethodPost, path, url.Values{"filename": {name}}, "application/json", body, size)
	if err != nil {
		return postureIngestion{}, err
	}
	var ing postureIngestion
	if err := json.Unmarshal(data, &ing); err != nil || ing.Metadata.Name == "" {
		return postureIngestion{}, fmt.Errorf("the answer is not an Ingestion: %.200q", data)
	}
	return ing, nil
}

// statusError is a failed request, with the metav1.Status message when the
// server sent one.
type statusError struct {
	code    int
	reason  metav1.StatusReason
	message string
	// kind is the resource a NotFound names (details.kind), if it names one.
	kind string
}

func (e *statusError) Error() string {
	if e.message == "" {
		return fmt.Sprintf("%d %s", e.code, http.StatusText(e.code))
	}
	return fmt.Sprintf("%s (%d %s)", e.message, e.code, http.StatusText(e.code))
}

// do sends one request and returns the body of a 2xx answer.
func (c *kube) do(ctx context.Context, method, path string, query url.Values, accept string, body io.Reader, size int64) ([]byte, error) {
	u := c.host + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = size
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, restapi.UnwrapURLError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		se := &statusError{code: resp.StatusCode}
		var st metav1.Status
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			se.reason, se.message = st.Reason, st.Message
			if st.Details != nil {
				se.kind = st.Details.Kind
			}
		} else {
			se.message = strings.TrimSpace(string(data))
		}
		return nil, se
	}
	return data, nil
}

// postureIngestion is the part of a posture.dev Ingestion the plugin shows.
type postureIngestion struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Source struct {
			Upload struct {
				Filename string `json:"filename"`
			} `json:"upload"`
		} `json:"source"`
	} `json:"spec"`
	Status struct {
		Phase   string `json:"phase"`
		Message string `json:"message"`
		Summary struct {
			Total     int64 `json:"total"`
			Processed int64 `json:"processed"`
			Invalid   int64 `json:"invalid"`
		} `json:"summary"`
	} `json:"status"`
}

func (i postureIngestion) terminal() bool { return restapi.Terminal(i.Status.Phase) }

func (k *kubectlPlugin) pushCommand() *cobra.Command {
	var name string
	var wait bool
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "push FILE",
		Short: "Upload an OCSF report (.ocsf.json) into a tenant namespace",
		Long: `Streams FILE to the aggregated API (create uploads in the namespace), which answers
with the Ingestion it created. With --wait, follows the Ingestion until it completes
(exit 0) or fails (exit 4).`,
		Example: `  kubectl posture push scan.ocsf.json -n tenant-acme --wait`,
		Args:    args(1, "a report file"),
		RunE: func(cmd *cobra.Command, files []string) error {
			if interval <= 0 {
				return usageError{errors.New("--interval must be positive")}
			}
			c, err := k.client()
			if err != nil {
				return err
			}
			f, err := os.Open(files[0])
			if err != nil {
				return exit(ExitError, "%v", err)
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return exit(ExitError, "%v", err)
			}
			if st.IsDir() {
				return exit(ExitError, "%s is a directory, not a report", files[0])
			}
			if name == "" {
				name = filepath.Base(files[0])
			}
			ing, err := c.upload(cmd.Context(), name, f, st.Size())
			if err != nil {
				return exit(ExitError, "upload %s to namespace %s: %v", files[0], c.namespace, err)
			}
			fmt.Fprintf(k.stdout, "ingestion.posture.dev/%s created in namespace %s (%s)\n", ing.Metadata.Name, c.namespace, name)
			if !wait {
				return nil
			}
			return k.wait(cmd.Context(), c, ing.Metadata.Name, interval, timeout)
		},
	}
	cmd.Flags().StringVar(&name, "filename", "", "file name the Ingestion records (default: FILE's base name)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the Ingestion until it completes or fails")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --wait: time between two status checks")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait: give up waiting after this long (0: never); the ingestion keeps running")
	return cmd
}

func (k *kubectlPlugin) waitCommand() *cobra.Command {
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Follow an Ingestion until it completes (exit 0) or fails (exit 4)",
		Args:  args(1, "an ingestion name"),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if interval <= 0 {
				return usageError{errors.New("--interval must be positive")}
			}
			c, err := k.client()
			if err != nil {
				return err
			}
			return k.wait(cmd.Context(), c, ids[0], interval, timeout)
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between two status checks")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0: never); the ingestion keeps running")
	return cmd
}

// wait polls the Ingestion with get alone (what posture-uploader grants),
// printing a line whenever its phase or progress changes.
func (k *kubectlPlugin) wait(ctx context.Context, c *kube, name string, interval, timeout time.Duration) error {
	path := postureGroupPath + "/namespaces/" + url.PathEscape(c.namespace) + "/ingestions/" + url.PathEscape(name)
	var last postureIngestion
	lastLine := ""
	ended, err := follow(ctx, interval, timeout, func(ctx context.Context) (bool, error) {
		data, err := c.do(ctx, http.MethodGet, path, nil, "application/json", nil, 0)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return false, nil
		default:
			return false, exit(ExitError, "ingestion %s in namespace %s: %v", name, c.namespace, err)
		}
		if err := json.Unmarshal(data, &last); err != nil {
			return false, exit(ExitError, "ingestion %s: %v", name, err)
		}
		s := last.Status
		if line := fmt.Sprintf("ingestion %s: %s, %d/%d processed, %d invalid", name, orDash(s.Phase), s.Summary.Processed, s.Summary.Total, s.Summary.Invalid); line != lastLine {
			fmt.Fprintln(k.stdout, line)
			lastLine = line
		}
		if !last.terminal() {
			return false, nil
		}
		if s.Phase == restapi.IngestionFailed {
			msg := ""
			if s.Message != "" {
				msg = ": " + termsafe.String(s.Message)
			}
			return true, exit(ExitJobFailed, "ingestion %s failed%s; kubectl posture errors %s -n %s tells why", name, msg, name, c.namespace)
		}
		return true, nil
	})
	if ended && errors.Is(err, context.DeadlineExceeded) && timeout > 0 {
		return exit(ExitError, "gave up waiting for ingestion %s after %s; it was %s (%d/%d processed) and keeps running",
			name, timeout, orDash(last.Status.Phase), last.Status.Summary.Processed, last.Status.Summary.Total)
	}
	return err
}

// listFlags are the list options kubectl get offers.
type listFlags struct {
	fieldSelector, labelSelector string
	chunkSize                    int64
	output                       string
}

func (l *listFlags) register(cmd *cobra.Command, labels bool) {
	cmd.Flags().StringVar(&l.fieldSelector, "field-selector", "", "filter by fields, e.g. severity=High,statusCode=FAIL (docs/kubernetes-api.md lists them)")
	if labels {
		cmd.Flags().StringVarP(&l.labelSelector, "selector", "l", "", "filter by labels")
	}
	cmd.Flags().Int64Var(&l.chunkSize, "chunk-size", 500, "objects fetched per request (limit/continue); 0 fetches all at once")
	cmd.Flags().StringVarP(&l.output, "output", "o", "table", "table, wide (every column the server serves, as kubectl's -o wide), json or name")
}

func (l *listFlags) check() error {
	switch l.output {
	case "table", "wide", "json", "name":
	default:
		return usageError{fmt.Errorf("-o/--output must be table, wide, json or name, not %q", l.output)}
	}
	if l.chunkSize < 0 {
		return usageError{errors.New("--chunk-size must be 0 or more")}
	}
	return nil
}

// kinds the get command lists: the path below the namespace.
var getKinds = map[string]struct{ group, resource string }{
	"ingestions": {postureGroupPath, "ingestions"},
	"findings":   {dataGroupPath, "findings"},
	"scans":      {dataGroupPath, "scans"},
}

// latestSelector is the findings field selector of the current state
// (data.posture.dev's LatestSelector), which get findings adds unless
// --history is given.
const latestSelector = "latest"

// findingsSelector is the field selector get findings sends: the current
// state unless history is asked for, or the user's selector already says
// which (latest=…) or names one finding (metadata.name, which the current
// state cannot be combined with).
func findingsSelector(user string, history bool) string {
	if history {
		return user
	}
	for _, req := range strings.Split(user, ",") {
		field, _, _ := strings.Cut(strings.TrimSpace(req), "=")
		field = strings.TrimRight(field, "!")
		if field == latestSelector || field == "metadata.name" {
			return user
		}
	}
	if user == "" {
		return latestSelector + "=true"
	}
	return latestSelector + "=true," + user
}

func (k *kubectlPlugin) getCommand() *cobra.Command {
	var l listFlags
	var history bool
	cmd := &cobra.Command{
		Use:   "get ingestions|findings|scans",
		Short: "List a tenant namespace's ingestions, findings or scans",
		Long: `Lists a tenant namespace's ingestions, findings or scans. Findings are the current
state by default (each account's latest findings, the field selector latest=true, as
REST's GET /api/v1/findings/latest and the web UI show them), with DELTA (new or changed
since the run before) and FIRST SEEN; --history lists every finding ever stored. Findings a
MuteRule mutes show the rule under MUTED and are left out of the current state unless the
field selector muted=true (only them) or muted=any (both) asks for them. -o wide adds
the columns kubectl get -o wide shows (findings: MUTE REASON; scans: FILE and SOURCE;
ingestions: MESSAGE).`,
		Example: `  kubectl posture get findings -n tenant-acme --field-selector severity=Critical,statusCode=FAIL
  kubectl posture get findings -n tenant-acme --field-selector muted=true
  kubectl posture get findings -n tenant-acme --history
  kubectl posture get scans -n tenant-acme -o wide
  kubectl posture get ingestions -n tenant-acme`,
		Args: func(cmd *cobra.Command, a []string) error {
			if len(a) != 1 {
				return usageError{errors.New("get needs one kind: ingestions, findings or scans")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			kind, ok := getKinds[normalKind(a[0])]
			if !ok {
				return usageError{fmt.Errorf("get %q: want ingestions, findings or scans", a[0])}
			}
			if err := l.check(); err != nil {
				return err
			}
			if kind.resource == "findings" {
				l.fieldSelector = findingsSelector(l.fieldSelector, history)
			} else if history {
				return usageError{fmt.Errorf("--history applies to findings, not to %s", kind.resource)}
			}
			c, err := k.client()
			if err != nil {
				return err
			}
			return k.list(cmd.Context(), c, kind.group+"/namespaces/"+url.PathEscape(c.namespace)+"/"+kind.resource, l)
		},
	}
	l.register(cmd, true)
	cmd.Flags().BoolVar(&history, "history", false, "findings: list every finding stored, not only the current state")
	return cmd
}

// normalKind accepts kubectl's singular forms too.
func normalKind(s string) string {
	s = strings.ToLower(s)
	switch s {
	case "ingestion", "ing":
		return "ingestions"
	case "finding":
		return "findings"
	case "scan":
		return "scans"
	}
	return s
}

func (k *kubectlPlugin) errorsCommand() *cobra.Command {
	var l listFlags
	cmd := &cobra.Command{
		Use:   "errors ID",
		Short: "List why records of an Ingestion were rejected (its ingestion errors)",
		Args:  args(1, "an ingestion name"),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := l.check(); err != nil {
				return err
			}
			c, err := k.client()
			if err != nil {
				return err
			}
			sel := ingestionErrorsField + "=" + ids[0]
			if l.fieldSelector != "" {
				sel += "," + l.fieldSelector
			}
			l.fieldSelector = sel
			err = k.list(cmd.Context(), c, dataGroupPath+"/namespaces/"+url.PathEscape(c.namespace)+"/ingestionerrors", l)
			// The server answers the errors of an Ingestion that does not
			// exist with a 404 naming it, as the REST API does.
			var se *statusError
			if errors.As(err, &se) && se.code == http.StatusNotFound && se.kind == "ingestions" {
				return exit(ExitError, "ingestion %s not found in namespace %s; kubectl posture get ingestions -n %s lists them", ids[0], c.namespace, c.namespace)
			}
			return err
		},
	}
	l.register(cmd, false)
	return cmd
}

// list pages through a collection with limit/continue. A table is printed
// once every page is read, so that its columns line up; only its text rows
// are held meanwhile, never the objects.
func (k *kubectlPlugin) list(ctx context.Context, c *kube, path string, l listFlags) error {
	q := url.Values{}
	if l.fieldSelector != "" {
		q.Set("fieldSelector", l.fieldSelector)
	}
	if l.labelSelector != "" {
		q.Set("labelSelector", l.labelSelector)
	}
	if l.chunkSize > 0 {
		q.Set("limit", fmt.Sprint(l.chunkSize))
	}
	accept := tableAccept
	if l.output == "json" {
		accept = "application/json"
	}
	tw := tabwriter.NewWriter(k.stdout, 0, 8, 3, ' ', 0)
	header, rows := false, 0
	var items []json.RawMessage
	for {
		data, err := c.do(ctx, http.MethodGet, path, q, accept, nil, 0)
		if err != nil {
			return exit(ExitError, "list %s in namespace %s: %v", path[strings.LastIndex(path, "/")+1:], c.namespace, err)
		}
		var cont string
		if l.output == "json" {
			var page struct {
				Metadata metav1.ListMeta   `json:"metadata"`
				Items    []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(data, &page); err != nil {
				return exit(ExitError, "list: %v", err)
			}
			items = append(items, page.Items...)
			cont = page.Metadata.Continue
		} else {
			var t metav1.Table
			if err := json.Unmarshal(data, &t); err != nil || t.Kind != "Table" {
				return exit(ExitError, "list: the server did not answer with a table: %.200q", data)
			}
			if l.output == "name" {
				for _, r := range t.Rows {
					rows++
					var m struct {
						Metadata metav1.ObjectMeta `json:"metadata"`
					}
					_ = json.Unmarshal(r.Object.Raw, &m)
					fmt.Fprintln(tw, termsafe.String(m.Metadata.Name))
				}
			} else {
				cols := tableColumns(t.ColumnDefinitions, l.output == "wide")
				if !header {
					fmt.Fprintln(tw, tableHeader(t.ColumnDefinitions, cols))
					header = true
				}
				for _, r := range t.Rows {
					rows++
					fmt.Fprintln(tw, tableRow(r.Cells, cols))
				}
			}
			cont = t.Continue
		}
		if cont == "" {
			break
		}
		q.Set("continue", cont)
	}
	if l.output == "json" {
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		if items == nil {
			list["items"] = []any{}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			return err
		}
		_, err := k.stdout.Write(buf.Bytes())
		return err
	}
	if l.output != "name" && rows == 0 {
		// kubectl says so on stderr and prints no header.
		fmt.Fprintf(k.stderr, "No resources found in %s namespace.\n", c.namespace)
		return nil
	}
	return tw.Flush()
}

// tableColumns are the indexes of the columns a table prints, in the
// server's order: those of priority 0, as kubectl get prints by default, or
// with wide every one, as kubectl get -o wide.
func tableColumns(defs []metav1.TableColumnDefinition, wide bool) []int {
	var cols []int
	for i, col := range defs {
		if wide || col.Priority == 0 {
			cols = append(cols, i)
		}
	}
	return cols
}

// tableHeader is the tab-separated header line of the columns cols, upper
// case as kubectl prints it.
func tableHeader(defs []metav1.TableColumnDefinition, cols []int) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = termsafe.String(strings.ToUpper(defs[c].Name))
	}
	return strings.Join(names, "\t")
}

// tableRow is the tab-separated line of a row's cells in the columns cols.
// A row shorter than the columns (a server that sends fewer cells) ends
// early, as in kubectl.
func tableRow(cells []any, cols []int) string {
	var out []string
	for _, c := range cols {
		if c < len(cells) {
			out = append(out, cell(cells[c]))
		}
	}
	return strings.Join(out, "\t")
}

// cell prints one table cell as kubectl does: <none> for nothing. Text is
// the report's, shown through termsafe: the server escapes it too, but the
// plugin also prints what another (older) server sends.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "<none>"
	case string:
		if x == "" {
			return "<none>"
		}
		return termsafe.String(x)
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprint(int64(x))
		}
		return fmt.Sprint(x)
	default:
		return fmt.Sprint(x)
	}
}
