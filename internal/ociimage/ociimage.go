// Package ociimage builds container images from static binaries with no
// Docker engine, and writes them as OCI image archives: an OCI image layout
// (oci-layout, index.json, blobs/) in one tar file, which
// `ctr images import`, `skopeo copy oci-archive:` and, once unpacked,
// `crane push` read.
//
// go-containerregistry assembles the image (config, manifest, digests); this
// package only decides what goes into the single layer and fixes every
// timestamp, owner and order, so the same files give the same digest on any
// machine and at any time.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user every image runs as: the "nonroot" user of distroless
// images, so the images are drop-in replacements for those built from the
// Dockerfile, and restricted Pod Security admits them.
const NonRoot = "65532:65532"

// File is one regular file of an image's layer.
type File struct {
	// Path inside the image, absolute ("/manager").
	Path string
	// Mode is the permission bits (0o755 for a binary).
	Mode fs.FileMode
	// Data is the content.
	Data []byte
}

// Spec describes one image.
type Spec struct {
	// Ref names the image in the archive, as containerd and the chart's
	// values name it: "ghcr.io/posture-dev/posture-manager:v0.1.0".
	Ref        string
	Files      []File
	Entrypoint []string
	// User runs the entrypoint ("uid:gid"); empty is NonRoot.
	User   string
	Labels map[string]string
}

// Build assembles the image: one layer holding Files (and their parent
// directories), a config with Entrypoint and User, OCI media types, and
// every timestamp at the Unix epoch.
func Build(s Spec) (v1.Image, error) {
	if s.Ref == "" || len(s.Entrypoint) == 0 {
		return nil, fmt.Errorf("ociimage: an image needs a ref and an entrypoint")
	}
	layerTar, err := layerTar(s.Files)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", s.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", s.Ref, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", s.Ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Entrypoint = s.Entrypoint
	cfg.Config.User = s.User
	if cfg.Config.User == "" {
		cfg.Config.User = NonRoot
	}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = s.Labels
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", s.Ref, err)
	}
	return mutate.CreatedAt(img, v1.Time{})
}

// layerTar writes files, sorted, with their parent directories, owned by
// root and dated at the epoch.
func layerTar(files []File) ([]byte, error) {
	entries := map[string]*tar.Header{}
	for _, f := range files {
		p := path.Clean(f.Path)
		if !path.IsAbs(p) || p == "/" {
			return nil, fmt.Errorf("file path %q: want an absolute path to a file", f.Path)
		}
		name := strings.TrimPrefix(p, "/")
		if _, dup := entries[name]; dup {
			return nil, fmt.Errorf("file path %q: listed twice", f.Path)
		}
		entries[name] = &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(f.Mode.Perm()), Size: int64(len(f.Data))}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir+"/"]; !ok {
				entries[dir+"/"] = &tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}
			}
		}
	}
	data := map[string][]byte{}
	for _, f := range files {
		data[strings.TrimPrefix(path.Clean(f.Path), "/")] = f.Data
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, n := range names {
		h := entries[n]
		h.Format = tar.FormatPAX
		// ModTime, owner and group stay zero: the epoch and root.
		if err := w.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := w.Write(data[n]); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img to path as an OCI image archive whose index names
// it ref, through a temporary layout directory beside path.
func WriteArchive(path, ref string, img v1.Image) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// containerd names an imported image after io.containerd.image.name;
	// OCI tools (skopeo) read org.opencontainers.image.ref.name.
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// tarDir archives a layout directory with sorted names and fixed metadata,
// so the archive's bytes depend on its content only.
func tarDir(dir, out string) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := tar.NewWriter(f)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		fi, err := os.Lstat(p)
		if err != nil {
			f.Close()
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size(), Format: tar.FormatPAX}
		if fi.IsDir() {
			h = &tar.Header{Name: n + "/", Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX}
		}
		if err := w.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if !fi.IsDir() {
			if err := copyFile(w, p); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyFile(w io.Writer, p string) error {
	r, err := os.Open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return err
}

// Digest is the manifest digest of img ("sha256:…"), the one a registry and
// `ctr images ls` show.
func Digest(img v1.Image) (string, error) {
	h, err := img.Digest()
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
