// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// project's CRDs for tests. The binaries come from hack/control-plane.sh, found
// through KUBEBUILDER_ASSETS or, failing that, built on demand, so `go test`
// works without make.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// Root is the repository root.
func Root() string {
	_, file, _, _ := goruntime.Caller(0)
	wd, _ := os.Getwd()
	return rootFrom(file, wd)
}

// modulePath is the repository's module.
const modulePath = "github.com/posture-dev/posture"

// rootFrom finds the repository root from this file's compiled path, or,
// when the binary was built with -trimpath (make dev builds every binary in
// one go build, with the flags of make build, so that the tree compiles
// once) and that path is the module's rather than the disk's, from the
// working directory up to the go.mod of this module.
func rootFrom(file, wd string) string {
	if filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && moduleOf(data) == modulePath {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// moduleOf is the module path a go.mod declares.
func moduleOf(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Scheme knows core Kubernetes kinds and posture.dev.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(posturev1.AddToScheme(s))
	return s
}

// Assets returns the directory holding kube-apiserver and etcd.
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(Root(), "hack", "control-plane.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("building the control plane (hack/control-plane.sh): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Option adjusts the control plane before it starts.
type Option func(*envtest.Environment)

// EtcdDataDir makes etcd keep its data in dir instead of a temporary
// directory removed at Stop, so a later Start with the same dir finds every
// object again (make dev keeps its cluster across runs this way).
func EtcdDataDir(dir string) Option {
	return func(env *envtest.Environment) {
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: dir}
	}
}

// Start starts a control plane with the CRDs installed. CRDs that already
// exist (a kept etcd data directory) are updated in place.
func Start(opts ...Option) (*envtest.Environment, *rest.Config, error) {
	assets, err := Assets()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(Root(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("start envtest: %w", err)
	}
	return env, cfg, nil
}

// Fixture is the path of a real scanner report kept in the repository
// (Prowler's OCSF output; examples/ holds copies for people to upload).
func Fixture(name string) string {
	return filepath.Join(Root(), "internal", "ocsf", "testdata", "prowler", name)
}

// Main is a TestMain body: it starts a control plane, hands its config to
// started (which may set package variables, or fail), runs the tests, stops
// the control plane and exits with the tests' code.
func Main(m *testing.M, started func(*rest.Config) error) {
	env, cfg, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := started(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = env.Stop()
	os.Exit(code)
}
