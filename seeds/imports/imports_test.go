package imports

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containers/storage/pkg/reexec"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// testLayout writes an OCI layout with an OCI-typed and a Docker-typed image, named by
// pinned references as precache names them, and returns the names with their digests.
func testLayout(t *testing.T, dir string) map[string]string {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := random.Layer(64<<10, types.OCILayer)
	names := map[string]string{}
	for i, mt := range []types.MediaType{types.OCIManifestSchema1, types.DockerManifestSchema2} {
		own, _ := random.Layer(32<<10, types.OCILayer)
		var img v1.Image = empty.Image
		if mt == types.OCIManifestSchema1 {
			img = mutate.ConfigMediaType(mutate.MediaType(img, mt), types.OCIConfigJSON)
		} else {
			base, own = withDockerType(t, base), withDockerType(t, own)
		}
		img, err := mutate.AppendLayers(img, base, own)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		name := "registry.example.com/ocp/c" + string(rune('a'+i)) + "@" + d.String()
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: name})); err != nil {
			t.Fatal(err)
		}
		names[name] = d.String()
	}
	return names
}

func withDockerType(t *testing.T, l v1.Layer) v1.Layer {
	t.Helper()
	return dockerLayer{l}
}

type dockerLayer struct{ v1.Layer }

func (dockerLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }

func storageRoots(t *testing.T) Options {
	root := t.TempDir()
	opts := Options{GraphRoot: filepath.Join(root, "graph"), RunRoot: filepath.Join(root, "run"), Driver: "vfs"}
	return opts
}

// inspect asks skopeo, an independent client, what containers-storage holds under name.
func inspect(t *testing.T, opts Options, name string) string {
	t.Helper()
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Fatal("skopeo is missing: install the Debian package skopeo (make deps)")
	}
	ref := "containers-storage:[vfs@" + opts.GraphRoot + "+" + opts.RunRoot + "]" + name
	out, err := exec.Command("skopeo", "inspect", ref).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v\n%s", ref, err, out)
	}
	var got struct{ Digest string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("skopeo inspect: %v\n%s", err, out)
	}
	return got.Digest
}

func TestImportLayout(t *testing.T) {
	dir := t.TempDir()
	names := testLayout(t, dir)
	opts := storageRoots(t)
	got, err := ImportLayout(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(names) {
		t.Fatalf("imported %d images, want %d", len(got), len(names))
	}
	for name, d := range names {
		if sd := inspect(t, opts, name); sd != d {
			t.Errorf("%s: containers-storage has digest %s, want %s", name, sd, d)
		}
	}
	// A second import (agent restarted) finds the same images and copies nothing.
	again, err := ImportLayout(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("second import: %v", err)
	}
	for i := range got {
		if again[i] != got[i] {
			t.Errorf("second import: %+v, first %+v", again[i], got[i])
		}
	}
}

func TestImportDisk(t *testing.T) {
	dir := t.TempDir()
	names := testLayout(t, dir)
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	disk := filepath.Join(t.TempDir(), "precache.tar")
	args := []string{"-C", dir, "-cf", disk, "oci-layout", "index.json"}
	for _, b := range blobs {
		args = append(args, "blobs/sha256/"+filepath.Base(b))
	}
	if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// A block device is bigger than the archive: pad like the stage does.
	f, _ := os.OpenFile(disk, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 1<<20))
	f.Close()

	opts := storageRoots(t)
	scratch := t.TempDir()
	got, err := ImportDisk(context.Background(), disk, scratch, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range got {
		if sd := inspect(t, opts, im.Ref); sd != names[im.Ref] {
			t.Errorf("%s: digest %s, want %s", im.Ref, sd, names[im.Ref])
		}
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("scratch copy left behind: %v", left)
	}

}

func TestExtractDiskRefuses(t *testing.T) {
	good := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		entries map[string]string
		want    string
	}{
		{"corrupt blob", map[string]string{"oci-layout": "{}", "index.json": "{}", "blobs/sha256/" + good: "not the content"}, "does not match its digest"},
		{"escape", map[string]string{"oci-layout": "{}", "index.json": "{}", "../etc/passwd": "x"}, "unexpected entry"},
		{"not a layout", map[string]string{"index.json": "{}"}, "not an OCI layout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, n := range []string{"oci-layout", "index.json", "blobs/sha256/" + good, "../etc/passwd"} {
				c, ok := tc.entries[n]
				if !ok {
					continue
				}
				tw.WriteHeader(&tar.Header{Name: n, Mode: 0o444, Size: int64(len(c)), Typeflag: tar.TypeReg})
				tw.Write([]byte(c))
			}
			tw.Close()
			err := ExtractDisk(context.Background(), &buf, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
