package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/posture-dev/posture/internal/testenv"
)

// TestImagesAreReproducible builds the images twice, into two directories
// and under two umasks, and finds the same manifest digests and the same
// archive bytes: what an image is depends on the source alone. (The
// binaries come from Go's build cache the second time; Go itself makes
// -trimpath builds reproducible, and the images' own bytes are what this
// project adds.) It also checks what each image holds: one static binary,
// run as 65532:65532.
func TestImagesAreReproducible(t *testing.T) {
	root := testenv.Root()
	t.Chdir(root)
	a, b := t.TempDir(), t.TempDir()
	if err := run(a, "", "charts/posture"); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	err := run(b, "", "charts/posture")
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range images {
		name := im.name + ".tar"
		da, db := read(t, filepath.Join(a, name)), read(t, filepath.Join(b, name))
		if string(da) != string(db) {
			t.Errorf("%s differs between two builds of the same source", name)
		}
		img := readImage(t, filepath.Join(a, name))
		cfg := img.config
		if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/"+im.cmd {
			t.Errorf("%s: user %q, entrypoint %v; want 65532:65532 and /%s", name, cfg.Config.User, cfg.Config.Entrypoint, im.cmd)
		}
		if len(img.files) != 1 || img.files[0] != im.cmd+" 0755" {
			t.Errorf("%s holds %v; want the one binary %s, mode 0755", name, img.files, im.cmd)
		}
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type imageContents struct {
	config struct {
		Config struct {
			User       string
			Entrypoint []string
		} `json:"config"`
	}
	files []string // "path mode" of each regular file
}

// readImage unpacks an archive's OCI layout and reads its one image.
func readImage(t *testing.T, archive string) imageContents {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		out, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(out, tr)
		out.Close()
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("%s: %d images in the index (%v)", archive, len(m.Manifests), err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	var out imageContents
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out.config); err != nil {
		t.Fatalf("%s: the config is not JSON: %v", archive, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		lt := tar.NewReader(rc)
		for {
			h, err := lt.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				out.files = append(out.files, fmt.Sprintf("%s %04o", h.Name, h.Mode))
			}
		}
		rc.Close()
	}
	return out
}

// TestDockerfileBuildsTheSameImages keeps the Dockerfile, for those who build
// with Docker, in step with make images: its build stage builds the
// binaries with this command, and each image target holds one of them alone
// in an empty image, run as 65532:65532.
func TestDockerfileBuildsTheSameImages(t *testing.T) {
	df := string(read(t, filepath.Join(testenv.Root(), "Dockerfile")))
	if !strings.Contains(df, "RUN go run ./hack/images -binaries /out") {
		t.Error("the Dockerfile's build stage does not build the binaries with hack/images -binaries")
	}
	for _, im := range images {
		stage := regexp.MustCompile(`(?s)FROM scratch AS ` + regexp.QuoteMeta(im.cmd) + `\n(.*?)(\n\n|$)`).FindStringSubmatch(df)
		if stage == nil {
			t.Errorf("the Dockerfile has no target %s (FROM scratch)", im.cmd)
			continue
		}
		want := "COPY --from=build /out/" + im.cmd + " /" + im.cmd + "\nUSER 65532:65532\nENTRYPOINT [\"/" + im.cmd + "\"]"
		if strings.TrimSpace(stage[1]) != want {
			t.Errorf("Dockerfile target %s:\n%s\nwant:\n%s", im.cmd, stage[1], want)
		}
	}
}
