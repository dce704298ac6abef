// Package scanner checks the security posture of a Kubernetes cluster and
// writes the results as OCSF Detection Findings (the shape of the reference
// scanner's output, which the ingestion API accepts) and CSV.
package scanner

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Version is the project release recorded in metadata.product.version.
// Release builds set it with
// -ldflags "-X github.com/posture-dev/posture/internal/scanner.Version=1.2.3";
// `go install module@v1.2.3` builds get it from the module version.
var Version = "0.1.0-dev"

// ProductVersion is Version, or the module version of a `go install`ed build.
func ProductVersion() string {
	if Version != "0.1.0-dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && strings.HasPrefix(bi.Main.Version, "v") {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return Version
}

// Cluster identifies the scanned cluster.
type Cluster struct {
	// UID is the billing identity (unmapped.provider_uid): the UID of the
	// kube-system namespace, which is created once with the cluster and
	// survives renames, new kubeconfigs and API endpoint changes. Cluster
	// names are no identity: every kubeadm cluster is called "kubernetes".
	UID     string
	Name    string // the kubeconfig context's cluster name, for people
	Context string // the kubeconfig context used
	Server  string // the API server URL
}

// Options of one scan.
type Options struct {
	Scope  Scope
	Checks []string // IDs to run; empty means all
	// ClusterUID overrides the detected cluster UID.
	ClusterUID string
	Cluster    Cluster
	Now        func() time.Time
}

// Report is the outcome of one scan.
type Report struct {
	ScanID  string
	Cluster Cluster
	Time    time.Time
	Results []Result
	// Skipped names checks that could not run, with why.
	Skipped map[string]string
}

// Failed counts failing results.
func (r *Report) Failed() int {
	n := 0
	for _, res := range r.Results {
		if !res.Pass {
			n++
		}
	}
	return n
}

// Scan reads the cluster and runs the checks.
func Scan(ctx context.Context, cs kubernetes.Interface, opts Options) (*Report, error) {
	selected := checks
	if len(opts.Checks) > 0 {
		selected = nil
		for _, id := range opts.Checks {
			c, ok := CheckByID(id)
			if !ok {
				return nil, fmt.Errorf("unknown check %q; `postctl scan kubernetes --list-checks` lists them", id)
			}
			if !slices.Contains(selected, c) {
				selected = append(selected, c)
			}
		}
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	cluster := opts.Cluster
	switch {
	case opts.ClusterUID != "":
		cluster.UID = opts.ClusterUID
	default:
		ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading namespace kube-system to identify the cluster (its UID is the cluster's id; pass --cluster-id to set one instead): %w", err)
		}
		cluster.UID = string(ns.UID)
	}

	inv, err := Collect(ctx, cs, opts.Scope)
	if err != nil {
		return nil, err
	}
	rep := &Report{ScanID: uuid.NewString(), Cluster: cluster, Time: now().UTC(), Skipped: map[string]string{}}
	for _, c := range selected {
		var missing []string
		for _, k := range c.Needs {
			if err, ok := inv.Missing[k]; ok {
				missing = append(missing, fmt.Sprintf("%s (%v)", k, err))
			}
		}
		if len(missing) > 0 {
			rep.Skipped[c.ID] = "cannot list " + strings.Join(missing, ", ")
			continue
		}
		for _, r := range c.eval(inv) {
			r.Check = c
			rep.Results = append(rep.Results, r)
		}
	}
	return rep, nil
}
