package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/posture-dev/posture/internal/pushclient"
	"github.com/posture-dev/posture/internal/scanner"
)

type scanFlags struct {
	kubeconfig, context string
	outputDir, fileName string
	formats             []string
	namespaces, exclude []string
	checks              []string
	listChecks          bool
	clusterID           string
	push                bool
	pushNamespace       string
	ignoreExitCode3     bool
	timeout             time.Duration
}

func (a *app) scanCommand() *cobra.Command {
	scan := &cobra.Command{
		Use:   "scan",
		Short: "Scan a target for posture problems",
		Args: func(_ *cobra.Command, a []string) error {
			if len(a) > 0 {
				return usageError{fmt.Errorf("unknown scan target %q; supported: kubernetes", a[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{errors.New("scan needs a target: postctl scan kubernetes")}
		},
	}
	var f scanFlags
	k := &cobra.Command{
		Use:   "kubernetes",
		Short: "Scan the cluster of the current kubeconfig context",
		Long: `Runs the posture checks against the cluster of the current kubeconfig context
(KUBECONFIG, else ~/.kube/config, else the in-cluster service account) and writes the
results under the output directory. Exit code 3 when any check fails, else 0; a push
(--push-to-cloud, or --push-to-cluster through the cluster's own aggregated API) never
changes it.`,
		Example: `  postctl scan kubernetes
  postctl scan kubernetes -o reports --output-formats csv --push-to-cloud
  postctl scan kubernetes --namespaces shop,payments --checks core_privileged_containers
  postctl scan kubernetes -M json-ocsf --push-to-cluster tenant-acme`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.scanKubernetes(cmd.Context(), f) },
	}
	fl := k.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context to scan (default: the current context)")
	fl.StringVarP(&f.outputDir, "output-directory", "o", "output", "directory the results are written to (created if missing)")
	fl.StringSliceVarP(&f.formats, "output-formats", "M", []string{scanner.FormatOCSF, scanner.FormatCSV}, "comma-separated output formats: json-ocsf, csv")
	fl.StringVarP(&f.fileName, "output-filename", "F", "", "base name of the output files (default: postctl-kubernetes-<UTC time>)")
	fl.StringSliceVar(&f.namespaces, "namespaces", nil, "scan only these namespaces (cluster-scoped RBAC objects are always scanned)")
	fl.StringSliceVar(&f.exclude, "exclude-namespaces", nil, "skip these namespaces")
	fl.StringSliceVar(&f.checks, "checks", nil, "run only these checks (IDs from --list-checks)")
	fl.BoolVar(&f.listChecks, "list-checks", false, "list the checks and exit")
	fl.StringVar(&f.clusterID, "cluster-id", "", "cluster identity recorded as unmapped.provider_uid (default: the UID of the kube-system namespace)")
	fl.BoolVar(&f.push, "push-to-cloud", false, "upload the findings to the ingestion API ("+pushclient.EnvAPIKey+", "+pushclient.EnvBaseURL+")")
	fl.StringVar(&f.pushNamespace, "push-to-cluster", "", "upload the findings into this tenant namespace through the scanned cluster's aggregated API (data.posture.dev), as the scanning identity: no API key (a scanner running as a pod)")
	fl.BoolVarP(&f.ignoreExitCode3, "ignore-exit-code-3", "z", false, "exit 0 even when checks fail (a scheduled scan, whose failed checks are findings, not a failed run)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "time limit for reading the cluster")
	scan.AddCommand(k)
	return scan
}

func (a *app) scanKubernetes(ctx context.Context, f scanFlags) error {
	if f.listChecks {
		w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CHECK\tSEVERITY\tTITLE")
		for _, c := range scanner.Checks() {
			fmt.Fprintf(w, "%s\t%s\t%s\n", c.ID, c.Severity.Label(), c.Title)
		}
		return w.Flush()
	}
	var formats []string
	for _, fm := range f.formats {
		fm = strings.ToLower(strings.TrimSpace(fm))
		if _, ok := scanner.Formats[fm]; !ok {
			return usageError{fmt.Errorf("unknown output format %q; use json-ocsf and/or csv", fm)}
		}
		if !slices.Contains(formats, fm) {
			formats = append(formats, fm)
		}
	}
	if len(formats) == 0 {
		return usageError{errors.New("--output-formats is empty; use json-ocsf and/or csv")}
	}
	if f.fileName != "" && (strings.ContainsAny(f.fileName, `/\`) || f.fileName == "." || f.fileName == "..") {
		return usageError{fmt.Errorf("--output-filename %q must be a file name, not a path; use -o for the directory", f.fileName)}
	}
	if f.push && f.pushNamespace != "" {
		return usageError{errors.New("--push-to-cloud and --push-to-cluster each upload the findings; choose one")}
	}
	if ns := f.pushNamespace; ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return usageError{fmt.Errorf("--push-to-cluster %q is not a namespace name: %s", ns, strings.Join(errs, "; "))}
		}
	}
	for _, id := range f.checks {
		if _, ok := scanner.CheckByID(id); !ok {
			return usageError{fmt.Errorf("unknown check %q; postctl scan kubernetes --list-checks lists them", id)}
		}
	}

	cfg, cluster, err := a.kubeConfig(f.kubeconfig, f.context)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client for %s: %w", cluster.Server, err)
	}
	scanCtx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	rep, err := scanner.Scan(scanCtx, cs, scanner.Options{
		Scope:      scanner.Scope{Namespaces: f.namespaces, ExcludeNamespaces: f.exclude},
		Checks:     f.checks,
		ClusterUID: f.clusterID,
		Cluster:    cluster,
	})
	if err != nil {
		return fmt.Errorf("scanning cluster %s (%s): %w", orDash(cluster.Name), cluster.Server, err)
	}
	for id, why := range rep.Skipped {
		fmt.Fprintf(a.stderr, "warning: check %s skipped: %s\n", id, why)
	}

	// Outputs.
	if err := os.MkdirAll(f.outputDir, 0o755); err != nil {
		return fmt.Errorf("creating the output directory: %w", err)
	}
	base := f.fileName
	if base == "" {
		base = "postctl-kubernetes-" + rep.Time.Format("20060102150405")
	}
	var written []string
	ocsfPath := ""
	for _, fm := range formats {
		path := filepath.Join(f.outputDir, base+scanner.Formats[fm])
		if err := rep.Write(fm, path); err != nil {
			return err
		}
		written = append(written, path)
		if fm == scanner.FormatOCSF {
			ocsfPath = path
		}
	}

	a.printSummary(rep, cluster)
	savedAt := "Scan results saved in " + strings.Join(written, ", ")
	if !f.push && f.pushNamespace == "" {
		// With a push, its outcome message says where the results are.
		fmt.Fprintln(a.stdout, savedAt)
	}

	code := ExitOK
	if rep.Failed() > 0 && !f.ignoreExitCode3 {
		code = ExitFindings
	}
	name := base + scanner.Formats[scanner.FormatOCSF]
	switch {
	case f.push:
		a.pushScan(ctx, rep, ocsfPath, name, savedAt)
	case f.pushNamespace != "":
		a.pushToCluster(ctx, cfg, f.pushNamespace, rep, ocsfPath, name, savedAt)
	}
	if code != ExitOK {
		return &exitError{code: code}
	}
	return nil
}

// pushScan uploads the scan's findings. It reports the outcome and nothing
// else: the caller's exit code does not depend on it.
func (a *app) pushScan(ctx context.Context, rep *scanner.Report, ocsfPath, name, savedAt string) {
	file, done, ok := a.uploadFile(rep, ocsfPath, savedAt)
	if !ok {
		return
	}
	defer done()
	res := pushclient.Push(ctx, pushclient.Request{File: file, Name: name, Getenv: a.getenv, UserAgent: userAgent()})
	res.Print(a.stdout, a.stderr, savedAt)
}

// uploadFile is the OCSF file an upload sends: the one written, or, when the
// chosen formats leave out OCSF, a temporary file in the system temporary
// directory (never the output directory, which holds only what was asked
// for), removed by done once sent.
func (a *app) uploadFile(rep *scanner.Report, ocsfPath, savedAt string) (file string, done func(), ok bool) {
	if ocsfPath != "" {
		return ocsfPath, func() {}, true
	}
	tmp, err := writeTempOCSF(rep)
	if err != nil {
		fmt.Fprintf(a.stderr, "Push failed: cannot write the temporary OCSF file for the upload: %v. Nothing was sent.\n%s\n", err, savedAt)
		return "", nil, false
	}
	return tmp, func() { os.Remove(tmp) }, true
}

// pushToCluster uploads the scan's findings into a tenant namespace through
// the aggregated API of the cluster it scanned, as the identity that
// scanned: kube RBAC (create uploads there) is the permission, and no API
// key is involved. Like pushScan, it reports and never fails the scan.
func (a *app) pushToCluster(ctx context.Context, cfg *rest.Config, namespace string, rep *scanner.Report, ocsfPath, name, savedAt string) {
	file, done, ok := a.uploadFile(rep, ocsfPath, savedAt)
	if !ok {
		return
	}
	defer done()
	fail := func(format string, args ...any) {
		fmt.Fprintf(a.stderr, "Push failed: "+format+"\n%s\n", append(args, savedAt)...)
	}
	f, err := os.Open(file)
	if err != nil {
		fail("%v. Nothing was sent.", err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		fail("%v. Nothing was sent.", err)
		return
	}
	c, err := newKube(cfg, namespace)
	if err != nil {
		fail("%v. Nothing was sent.", err)
		return
	}
	ing, err := c.upload(ctx, name, f, st.Size())
	var se *statusError
	switch {
	case err == nil:
		fmt.Fprintf(a.stdout, "Findings pushed into namespace %s: ingestion.posture.dev/%s (kubectl get ingestion -n %s %s).\n%s\n",
			namespace, ing.Metadata.Name, namespace, ing.Metadata.Name, savedAt)
	case errors.As(err, &se) && se.code == http.StatusForbidden:
		fail("%v. This identity may not create uploads (data.posture.dev) in namespace %s: bind it to the ClusterRole posture-uploader there.", err, namespace)
	case errors.As(err, &se) && se.code == http.StatusPaymentRequired:
		fail("%v. Ingestion needs a subscription: the Tenant of namespace %s has none active.", err, namespace)
	case errors.As(err, &se) && se.code == http.StatusNotFound:
		fail("%v. Is the aggregated API data.posture.dev installed (kubectl get apiservice v1alpha1.data.posture.dev)?", err)
	default:
		fail("%v. Check that the cluster's aggregated API data.posture.dev is available.", err)
	}
}

func writeTempOCSF(rep *scanner.Report) (string, error) {
	f, err := os.CreateTemp(os.TempDir(), "postctl-push-*"+scanner.Formats[scanner.FormatOCSF])
	if err != nil {
		return "", err
	}
	if err := rep.WriteOCSF(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func (a *app) printSummary(rep *scanner.Report, cluster scanner.Cluster) {
	pass := len(rep.Results) - rep.Failed()
	fmt.Fprintf(a.stdout, "Scanned cluster %s (%s, context %s, id %s): %d findings, %d PASS, %d FAIL",
		orDash(cluster.Name), cluster.Server, orDash(cluster.Context), rep.Cluster.UID, len(rep.Results), pass, rep.Failed())
	if s := rep.SeverityCounts(); s != "" {
		fmt.Fprintf(a.stdout, " (%s)", s)
	}
	fmt.Fprintln(a.stdout, ".")
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tSEVERITY\tFAIL\tPASS")
	for _, s := range rep.Summaries() {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", s.Check.ID, s.Check.Severity.Label(), s.Fail, s.Pass)
	}
	_ = w.Flush()
}

// kubeConfig loads the client configuration the way kubectl does, but from
// the environment given to Run: --kubeconfig, else KUBECONFIG, else
// ~/.kube/config, else the in-cluster service account.
func (a *app) kubeConfig(explicit, contextName string) (*rest.Config, scanner.Cluster, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: explicit}
	if kc := a.getenv("KUBECONFIG"); kc != "" {
		rules.Precedence = filepath.SplitList(kc)
	} else if home := a.getenv("HOME"); home != "" {
		rules.Precedence = []string{filepath.Join(home, ".kube", "config")}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: contextName})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, scanner.Cluster{}, errors.New("no cluster to scan: no kubeconfig found (set KUBECONFIG or --kubeconfig) and not running inside a cluster")
		}
		return nil, scanner.Cluster{}, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cluster := scanner.Cluster{Server: cfg.Host, Context: contextName}
	if raw, err := cc.RawConfig(); err == nil {
		if cluster.Context == "" {
			cluster.Context = raw.CurrentContext
		}
		if c, ok := raw.Contexts[cluster.Context]; ok {
			cluster.Name = c.Cluster
		}
	}
	cfg.UserAgent = userAgent()
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, cluster, nil
}

func userAgent() string { return "postctl/" + scanner.ProductVersion() }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
