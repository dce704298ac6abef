// Command krew builds the kubectl-posture archives krew installs and writes
// their plugin manifest from hack/krew/posture.yaml:
//
//	go run ./hack/krew -version v1.2.3 -out dist/krew [-platforms linux/amd64,darwin/arm64]
//
// Each archive (tar.gz; zip for Windows) holds the binary alone, built with
// CGO off and -trimpath, its version stamped as postctl's is. The manifest's
// URIs point at the GitHub release of that version unless -base-url says
// otherwise.
package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
)

// DefaultPlatforms are the ones the manifest lists unless -platforms narrows
// them.
const DefaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64"

type platform struct {
	OS, Arch    string
	URI, SHA256 string
	Bin         string
}

func main() {
	version := flag.String("version", "", "release version, e.g. v1.2.3 (required)")
	out := flag.String("out", "dist/krew", "directory for the archives and posture.yaml")
	platforms := flag.String("platforms", DefaultPlatforms, "comma-separated os/arch list")
	baseURL := flag.String("base-url", "", "where the archives are published (default: the GitHub release of -version)")
	root := flag.String("root", ".", "the repository's root (where cmd/kubectl-posture and hack/krew/posture.yaml are)")
	flag.Parse()
	if err := run(*root, *version, *out, *platforms, *baseURL); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

func run(root, version, out, platforms, baseURL string) error {
	if !strings.HasPrefix(version, "v") || strings.ContainsAny(version, " /") {
		return fmt.Errorf("-version %q: want a release tag such as v1.2.3", version)
	}
	if baseURL == "" {
		baseURL = "https://github.com/posture-dev/posture/releases/download/" + version
	}
	t, err := template.ParseFiles(filepath.Join(root, "hack", "krew", "posture.yaml"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var ps []platform
	for _, osArch := range strings.Split(platforms, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(osArch), "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("-platforms: %q is not os/arch", osArch)
		}
		p, err := buildArchive(root, version, out, goos, goarch)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", goos, goarch, err)
		}
		p.URI = strings.TrimRight(baseURL, "/") + "/" + filepath.Base(p.URI)
		ps = append(ps, p)
	}
	f, err := os.Create(filepath.Join(out, "posture.yaml"))
	if err != nil {
		return err
	}
	if err := t.Execute(f, map[string]any{"Version": version, "Platforms": ps}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func buildArchive(root, version, out, goos, goarch string) (platform, error) {
	bin := "kubectl-posture"
	if goos == "windows" {
		bin += ".exe"
	}
	dir, err := os.MkdirTemp("", "krew-")
	if err != nil {
		return platform{}, err
	}
	defer os.RemoveAll(dir)
	binPath := filepath.Join(dir, bin) // absolute: go build runs in root
	cmd := exec.Command("go", "build", "-trimpath", "-o", binPath,
		"-ldflags", "-s -w -X github.com/posture-dev/posture/internal/scanner.Version="+strings.TrimPrefix(version, "v"),
		"./cmd/kubectl-posture")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return platform{}, fmt.Errorf("go build: %w", err)
	}
	name := fmt.Sprintf("kubectl-posture_%s_%s", goos, goarch)
	if goos == "windows" {
		name += ".zip"
	} else {
		name += ".tar.gz"
	}
	archive := filepath.Join(out, name)
	if goos == "windows" {
		err = writeZip(archive, binPath, bin)
	} else {
		err = writeTarGz(archive, binPath, bin)
	}
	if err != nil {
		return platform{}, err
	}
	sum, err := sha256File(archive)
	if err != nil {
		return platform{}, err
	}
	return platform{OS: goos, Arch: goarch, URI: archive, SHA256: sum, Bin: bin}, nil
}

func writeTarGz(archive, src, name string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	for _, c := range []io.Closer{tw, gz, f} {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return nil
}

func writeZip(archive, src, name string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
