// Command images builds Posture's container images with no Docker engine and
// writes them as OCI image archives (make images):
//
//	posture-manager     /manager     the operator; worker Jobs run it too (manager worker)
//	posture-mcp-server  /mcp-server  the MCP tool server of MCPServer objects
//	posture-postctl     /postctl     the in-cluster scanner (postctl scan kubernetes)
//
// Each holds one static binary and runs as 65532:65532, with nothing to write
// but the volumes the chart mounts. Image names are the chart's: the
// repositories in charts/posture/values.yaml and the tag its appVersion, so an
// install with default values finds them once imported.
//
// With -binaries DIR it only builds the binaries, with the same flags; the
// Dockerfile does that, so both ways give the same files.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/posture-dev/posture/internal/ociimage"
)

// image is one product image: the command it runs and the values.yaml key of
// its repository.
type image struct {
	name, cmd string
	valuesKey []string
}

var images = []image{
	{"posture-manager", "manager", []string{"image", "repository"}},
	{"posture-mcp-server", "mcp-server", []string{"mcpServerImage", "repository"}},
	{"posture-postctl", "postctl", []string{"scanner", "image", "repository"}},
}

func main() {
	out := flag.String("out", "dist/images", "directory the archives are written to")
	binaries := flag.String("binaries", "", "only build the binaries into this directory (what the Dockerfile runs)")
	chart := flag.String("chart", "charts/posture", "the chart whose values name the images")
	flag.Parse()
	if err := run(*out, *binaries, *chart); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out, binaries, chart string) error {
	if binaries != "" {
		return buildBinaries(binaries)
	}
	refs, err := imageRefs(chart)
	if err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "posture-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	if err := buildBinaries(bin); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tDIGEST\tARCHIVE\tSIZE")
	for i, im := range images {
		data, err := os.ReadFile(filepath.Join(bin, im.cmd))
		if err != nil {
			return err
		}
		img, err := ociimage.Build(ociimage.Spec{
			Ref:        refs[i],
			Files:      []ociimage.File{{Path: "/" + im.cmd, Mode: 0o755, Data: data}},
			Entrypoint: []string{"/" + im.cmd},
			Labels: map[string]string{
				"org.opencontainers.image.title":  im.name,
				"org.opencontainers.image.source": "https://github.com/posture-dev/posture",
			},
		})
		if err != nil {
			return err
		}
		archive := filepath.Join(out, im.name+".tar")
		if err := ociimage.WriteArchive(archive, refs[i], img); err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		digest, err := ociimage.Digest(img)
		if err != nil {
			return err
		}
		fi, err := os.Stat(archive)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f MiB\n", refs[i], digest, archive, float64(fi.Size())/(1<<20))
	}
	return tw.Flush()
}

// buildBinaries compiles every image's command in one go build: static,
// without paths or VCS stamps, so the same source gives the same bytes.
func buildBinaries(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", dir + "/"}
	for _, im := range images {
		args = append(args, "./cmd/"+im.cmd)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %v: %w", args, err)
	}
	return nil
}

// imageRefs reads each image's repository from the chart's values and its tag
// from the chart's appVersion.
func imageRefs(chart string) ([]string, error) {
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := readYAML(filepath.Join(chart, "Chart.yaml"), &meta); err != nil {
		return nil, err
	}
	var values map[string]any
	if err := readYAML(filepath.Join(chart, "values.yaml"), &values); err != nil {
		return nil, err
	}
	refs := make([]string, len(images))
	for i, im := range images {
		var v any = values
		for _, k := range im.valuesKey {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		repo, _ := v.(string)
		if repo == "" || meta.AppVersion == "" {
			return nil, fmt.Errorf("%s: no %v in values.yaml or no appVersion in Chart.yaml", chart, im.valuesKey)
		}
		refs[i] = repo + ":" + meta.AppVersion
	}
	return refs, nil
}

func readYAML(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
