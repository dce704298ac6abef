package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestManifestAndArchive builds the archive for this machine's platform and
// checks that the manifest is what krew reads: the plugin's name, version,
// a platform whose sha256 is the archive's, and a bin the archive holds; and
// that the binary runs and reports the version.
func TestManifestAndArchive(t *testing.T) {
	out := t.TempDir()
	plat := runtime.GOOS + "/" + runtime.GOARCH
	if err := run(filepath.Join("..", ".."), "v1.2.3", out, plat, "https://example.com/rel"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "posture.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("posture.yaml: %v\n%s", err, raw)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "posture" ||
		m.Spec.Version != "v1.2.3" || m.Spec.ShortDescription == "" {
		t.Errorf("manifest header %+v", m)
	}
	if len(m.Spec.Platforms) != 1 {
		t.Fatalf("%d platforms, want 1", len(m.Spec.Platforms))
	}
	p := m.Spec.Platforms[0]
	name := "kubectl-posture_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH ||
		p.URI != "https://example.com/rel/"+name || p.Bin != "kubectl-posture" ||
		len(p.Files) != 1 || p.Files[0].From != "kubectl-posture" {
		t.Errorf("platform %+v", p)
	}
	archive := filepath.Join(out, name)
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if p.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 %s, the archive's is %x", p.SHA256, sum)
	}

	// The archive holds the bin alone, executable.
	f, _ := os.Open(archive)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	h, err := tr.Next()
	if err != nil || h.Name != "kubectl-posture" || h.Mode&0o111 == 0 {
		t.Fatalf("first entry %+v, %v", h, err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-posture")
	w, _ := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if _, err := io.Copy(w, tr); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more than the binary in the archive: %v", err)
	}
	got, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), "1.2.3") {
		t.Errorf("kubectl-posture --version: %q %v", got, err)
	}
}

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct{ version, platforms, want string }{
		{"1.2.3", "linux/amd64", "want a release tag"},
		{"v1.2.3", "linux", `"linux" is not os/arch`},
	} {
		err := run(filepath.Join("..", ".."), tc.version, t.TempDir(), tc.platforms, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q, %q): %v, want %q", tc.version, tc.platforms, err, tc.want)
		}
	}
}
