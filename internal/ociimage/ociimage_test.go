package ociimage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The digest depends on the files, entrypoint and user only: not on the
// order files are listed in, nor on when or where the image is built.
func TestDigestDependsOnContentOnly(t *testing.T) {
	a := File{Path: "/bin/a", Mode: 0o755, Data: []byte("a")}
	b := File{Path: "/b", Mode: 0o644, Data: []byte("b")}
	digest := func(s Spec) string {
		t.Helper()
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Digest(img)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := Spec{Ref: "example.test/x:1", Files: []File{a, b}, Entrypoint: []string{"/bin/a"}}
	same := base
	same.Files = []File{b, a}
	if digest(base) != digest(same) {
		t.Error("listing the files in another order changed the digest")
	}
	for name, s := range map[string]Spec{
		"another mode": {Ref: base.Ref, Files: []File{{Path: a.Path, Mode: 0o700, Data: a.Data}, b}, Entrypoint: base.Entrypoint},
		"another user": {Ref: base.Ref, Files: base.Files, Entrypoint: base.Entrypoint, User: "1000:1000"},
		"another byte": {Ref: base.Ref, Files: []File{{Path: a.Path, Mode: a.Mode, Data: []byte("A")}, b}, Entrypoint: base.Entrypoint},
	} {
		if digest(s) == digest(base) {
			t.Errorf("%s: same digest", name)
		}
	}
	// The archive's bytes too, wherever it is written.
	img, err := Build(base)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := filepath.Join(t.TempDir(), "x.tar"), filepath.Join(t.TempDir(), "y.tar")
	for _, p := range []string{p1, p2} {
		if err := WriteArchive(p, base.Ref, img); err != nil {
			t.Fatal(err)
		}
	}
	d1, _ := os.ReadFile(p1)
	d2, _ := os.ReadFile(p2)
	if len(d1) == 0 || string(d1) != string(d2) {
		t.Error("two archives of one image differ")
	}
}

func TestBuildRefusesBadSpecs(t *testing.T) {
	for name, tc := range map[string]struct {
		spec Spec
		want string
	}{
		"no entrypoint": {Spec{Ref: "x:1", Files: []File{{Path: "/a"}}}, "an entrypoint"},
		"relative path": {Spec{Ref: "x:1", Entrypoint: []string{"/a"}, Files: []File{{Path: "a"}}}, `"a": want an absolute path`},
		"root":          {Spec{Ref: "x:1", Entrypoint: []string{"/a"}, Files: []File{{Path: "/"}}}, `"/": want an absolute path`},
		"listed twice":  {Spec{Ref: "x:1", Entrypoint: []string{"/a"}, Files: []File{{Path: "/a"}, {Path: "/a/"}}}, "listed twice"},
	} {
		if _, err := Build(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
