// Command helm renders charts/posture the way `helm template` would, using
// Helm's own chart loader and template engine (no helm binary is installed on
// our machines). It lives in its own module so Helm's dependencies never
// touch the operator's. Usage: go run . [-set key=value ...] CHART_DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
)

type sets []string

func (s *sets) String() string     { return strings.Join(*s, ",") }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var overrides sets
	flag.Var(&overrides, "set", "value override, as helm --set")
	namespace := flag.String("namespace", "posture-system", "release namespace")
	release := flag.String("name", "posture", "release name")
	upgrade := flag.Bool("upgrade", false, "render as helm upgrade does (revision 2; files under crds/ are not applied)")
	kubeconfig := flag.String("kubeconfig", "", "with -install or -uninstall: the cluster")
	install := flag.Bool("install", false, "install or upgrade the release in the cluster (helm upgrade --install) instead of rendering")
	uninstall := flag.Bool("uninstall", false, "uninstall the release from the cluster")
	flag.Parse()
	switch {
	case *uninstall:
		if err := uninstallRelease(*kubeconfig, *release, *namespace); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	case flag.NArg() != 1:
		fmt.Fprintln(os.Stderr, "usage: go run . [-set k=v] [-upgrade | -install -kubeconfig FILE] CHART_DIR | -uninstall -kubeconfig FILE")
		os.Exit(2)
	case *install:
		rev, err := applyRelease(*kubeconfig, flag.Arg(0), *release, *namespace, overrides)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("revision %d\n", rev)
		return
	}
	out, err := render(flag.Arg(0), *release, *namespace, overrides, *upgrade)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(out[name]) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s\n%s\n", name, out[name])
	}
}

// render returns every file the chart renders, by name (NOTES.txt included),
// after checking the values against values.schema.json as helm install does.
// upgrade renders as helm upgrade does.
func render(dir, release, namespace string, overrides []string, upgrade bool) (map[string]string, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	return renderValues(chrt, release, namespace, map[string]any{}, overrides, upgrade)
}

// parseSets reads --set style overrides.
func parseSets(overrides []string) (map[string]any, error) {
	vals := map[string]any{}
	for _, s := range overrides {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return vals, nil
}

// renderValues renders chrt with vals (as from -f files) and overrides on top.
func renderValues(chrt *chart.Chart, release, namespace string, vals map[string]any, overrides []string, upgrade bool) (map[string]string, error) {
	for _, s := range overrides {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: !upgrade, IsUpgrade: upgrade, Revision: 1}
	if upgrade {
		opts.Revision = 2
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
	rv, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, err
	}
	// helm install applies files under crds/ as they are, helm upgrade never
	// does: that is why the chart's CRDs are templates instead.
	if upgrade {
		return out, nil
	}
	for _, crd := range chrt.CRDObjects() {
		out[crd.Filename] = string(crd.File.Data)
	}
	return out, nil
}
