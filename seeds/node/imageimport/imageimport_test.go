package imageimport

import (
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
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(importChild())
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
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{ocispec.AnnotationRefName: name})); err != nil {
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
	rep, err := ImportLayout(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Images
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
		if again.Images[i] != got[i] {
			t.Errorf("second import: %+v, first %+v", again.Images[i], got[i])
		}
	}
}

// tarDisk packs the layout in dir with GNU tar, an independent writer of the disk format,
// padded like a block device bigger than the archive.
func tarDisk(t *testing.T, dir string) string {
	t.Helper()
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	disk := filepath.Join(t.TempDir(), "precache.tar")
	args := []string{"-C", dir, "-cf", disk, "oci-layout", "index.json"}
	for _, b := range blobs {
		args = append(args, "blobs/sha256/"+filepath.Base(b))
	}
	if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	f, _ := os.OpenFile(disk, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 1<<20))
	f.Close()
	return disk
}

func TestImportDisk(t *testing.T) {
	dir := t.TempDir()
	names := testLayout(t, dir)
	disk := tarDisk(t, dir)
	opts := storageRoots(t)
	scratch := t.TempDir()
	opts.ScratchDir = scratch
	rep, err := ImportDisk(context.Background(), disk, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Images) != len(names) {
		t.Fatalf("imported %d images, want %d", len(rep.Images), len(names))
	}
	for _, im := range rep.Images {
		if sd := inspect(t, opts, im.Ref); sd != names[im.Ref] {
			t.Errorf("%s: digest %s, want %s", im.Ref, sd, names[im.Ref])
		}
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("scratch copy left behind: %v", left)
	}
}

// A disk the format reader refuses imports nothing and leaves no scratch copy.
func TestImportDiskRefusesBadDisk(t *testing.T) {
	dir := t.TempDir()
	testLayout(t, dir)
	disk := tarDisk(t, dir)
	b, _ := os.ReadFile(disk)
	os.WriteFile(disk, b[:8<<10+100], 0o644) // inside the first blobs
	scratch := t.TempDir()
	opts := storageRoots(t)
	opts.ScratchDir = scratch
	got, err := ImportDisk(context.Background(), disk, opts)
	if err == nil || !strings.Contains(err.Error(), disk) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("err = %v, want the disk named and called truncated", err)
	}
	if len(got.Images) != 0 {
		t.Errorf("imported %v from a bad disk", got)
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("scratch copy left behind: %v", left)
	}
}
