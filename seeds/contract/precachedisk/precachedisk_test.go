package precachedisk

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
)

// putBlob writes b into the layout in dir under its digest.
func putBlob(t *testing.T, dir string, b []byte) digest.Digest {
	t.Helper()
	d := digest.FromBytes(b)
	if err := os.WriteFile(BlobPath(dir, d), b, 0o444); err != nil {
		t.Fatal(err)
	}
	return d
}

// testLayout writes, through the package's writer API, a layout of an OCI-typed and a
// Docker-typed image sharing a base layer, and returns its index.
func testLayout(t *testing.T, dir string) []Image {
	t.Helper()
	if err := CreateLayout(dir); err != nil {
		t.Fatal(err)
	}
	base, err := random.Layer(64<<10, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	var images []Image
	for i, mt := range []types.MediaType{types.OCIManifestSchema1, types.DockerManifestSchema2} {
		own, err := random.Layer(32<<10, types.OCILayer)
		if err != nil {
			t.Fatal(err)
		}
		cfgType := types.OCIConfigJSON
		if mt == types.DockerManifestSchema2 {
			cfgType = types.DockerConfigJSON
		}
		img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, mt), cfgType), base, own)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []v1.Layer{base, own} {
			rc, _ := l.Compressed()
			b, _ := io.ReadAll(rc)
			putBlob(t, dir, b)
		}
		cfg, _ := img.RawConfigFile()
		putBlob(t, dir, cfg)
		raw, _ := img.RawManifest()
		d := putBlob(t, dir, raw)
		ref := fmt.Sprintf("registry.example.com/ocp/c%d@%s", i, d)
		images = append(images, Image{Ref: ref, MediaType: string(mt), Digest: d, Size: int64(len(raw))})
	}
	if err := WriteIndex(dir, images); err != nil {
		t.Fatal(err)
	}
	return images
}

// layoutFilesOf reads every file of a layout, by slash-separated relative name.
func layoutFilesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "layout")
	images := testLayout(t, src)
	disk := filepath.Join(t.TempDir(), "precache.tar")
	var lastDone, lastTotal int64
	n, err := Write(ctx, src, disk, func(done, total int64) { lastDone, lastTotal = done, total })
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(disk); fi.Size() != n || n%Align != 0 {
		t.Errorf("disk is %d bytes, Write says %d; want the same, a multiple of %d", fi.Size(), n, Align)
	}
	if lastDone == 0 || lastDone != lastTotal {
		t.Errorf("last progress %d/%d, want all bytes done", lastDone, lastTotal)
	}
	// GNU tar, an independent reader, sees the magic first, then the index, then the blobs.
	list, err := exec.Command("tar", "-tf", disk).Output()
	if err != nil {
		t.Fatalf("tar -tf: %v", err)
	}
	names := strings.Fields(string(list))
	want := layoutFilesOf(t, src)
	if len(names) != len(want) || names[0] != "oci-layout" || names[1] != "index.json" || !slices.IsSorted(names[2:]) {
		t.Errorf("disk entries = %v", names)
	}

	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := t.TempDir()
	got, err := Extract(ctx, f, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, images) {
		t.Errorf("Extract index = %+v, want %+v", got, images)
	}
	if again, err := ReadIndex(dst); err != nil || !slices.Equal(again, images) {
		t.Errorf("ReadIndex = %+v, %v; want %+v", again, err, images)
	}
	gotFiles := layoutFilesOf(t, dst)
	for name, content := range want {
		if gotFiles[name] != content {
			t.Errorf("%s differs after the round trip", name)
		}
	}
	if len(gotFiles) != len(want) {
		t.Errorf("unpacked %d files, the layout has %d", len(gotFiles), len(want))
	}
	// go-containerregistry, an independent reader, finds every image whole under its digest.
	p, err := layout.FromPath(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range images {
		h, _ := v1.NewHash(im.Digest.String())
		img, err := p.Image(h)
		if err != nil {
			t.Fatalf("%s: %v", im.Ref, err)
		}
		if err := wholeImage(img, im.Digest); err != nil {
			t.Errorf("%s: %v", im.Ref, err)
		}
	}
}

// wholeImage checks that img has digest d and that its config and every layer are present
// and match their digests.
func wholeImage(img v1.Image, d digest.Digest) error {
	if got, err := img.Digest(); err != nil || got.String() != d.String() {
		return fmt.Errorf("manifest digest %v (%v), want %s", got, err, d)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if name, _ := img.ConfigName(); name.String() != digest.FromBytes(cfg).String() {
		return fmt.Errorf("config does not match %s", name)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		want, _ := l.Digest()
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		got, err := digest.FromReader(rc)
		rc.Close()
		if err != nil || got.String() != want.String() {
			return fmt.Errorf("layer %s reads as %s (%v)", want, got, err)
		}
	}
	return nil
}

// The same layout gives the same disk, whenever its files were written.
func TestWriteIsReproducible(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testLayout(t, src)
	a := filepath.Join(t.TempDir(), "a.tar")
	if _, err := Write(ctx, src, a, nil); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(src, "index.json"), later, later)
	b := filepath.Join(t.TempDir(), "b.tar")
	if _, err := Write(ctx, src, b, nil); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("the same layout gave two different disks")
	}
}

// Write refuses a layout a reader would refuse, rather than ship a disk the node rejects.
func TestWriteRefuses(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(dir string) error
	}{
		{"stray file", func(dir string) error { return os.WriteFile(filepath.Join(dir, "README"), nil, 0o644) }},
		{"temporary blob", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "blobs", "sha256", ".extract-1"), nil, 0o644)
		}},
		{"symlink", func(dir string) error {
			return os.Symlink("/etc/passwd", filepath.Join(dir, "blobs", "sha256", strings.Repeat("a", 64)))
		}},
		{"other algorithm", func(dir string) error {
			os.MkdirAll(filepath.Join(dir, "blobs", "sha512"), 0o755)
			return os.WriteFile(filepath.Join(dir, "blobs", "sha512", strings.Repeat("a", 128)), nil, 0o644)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			testLayout(t, dir)
			if err := tc.spoil(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Write(context.Background(), dir, filepath.Join(t.TempDir(), "disk"), nil)
			if err == nil || !strings.Contains(err.Error(), "not part of a precache disk") {
				t.Errorf("err = %v, want a refusal", err)
			}
		})
	}
}

type entry struct {
	name, body string
	typ        byte
	link       string
}

// archive writes entries as a tar; closed adds the end-of-archive records.
func archive(t *testing.T, entries []entry, closed bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Mode: 0o444, Typeflag: typ, Linkname: e.link}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	if closed {
		tw.Close()
	} else {
		tw.Flush()
	}
	return buf.Bytes()
}

func TestExtractRefuses(t *testing.T) {
	manifest := `{"schemaVersion":2}`
	md := digest.FromString(manifest)
	blob := entry{name: "blobs/sha256/" + md.Encoded(), body: manifest}
	magic := entry{name: "oci-layout", body: `{"imageLayoutVersion":"1.0.0"}`}
	index := entry{name: "index.json", body: fmt.Sprintf(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"r.example/a@%s"}}]}`, md, len(manifest), md)}
	good := []entry{magic, index, blob}
	agent := entry{name: AgentEntry, body: "#!/bin/sh\n"}
	agentIndex := entry{name: "index.json", body: strings.Replace(index.body, `{"schemaVersion":2,`,
		fmt.Sprintf(`{"schemaVersion":2,"annotations":{%q:%q},`, AnnotationAgentDigest, digest.FromString(agent.body)), 1)}
	big := make([]byte, 4096)
	rand.Read(big)
	bigBlob := entry{name: "blobs/sha256/" + digest.FromBytes(big).Encoded(), body: string(big)}
	whole := archive(t, append(slices.Clone(good), bigBlob), true)
	with := func(extra ...entry) []byte { return archive(t, append(slices.Clone(good), extra...), true) }
	tests := []struct {
		name string
		disk []byte
		want string
	}{
		{"empty", nil, "no oci-layout"},
		{"zeros", make([]byte, 1<<20), "no oci-layout"},
		{"not a tar", bytes.Repeat([]byte("snofactory"), 200), "not a precache disk"},
		{"wrong magic", archive(t, []entry{index, magic, blob}, true), "starts with \"index.json\""},
		{"wrong version", archive(t, []entry{{name: "oci-layout", body: `{"imageLayoutVersion":"2.0.0"}`}, index, blob}, true), "version \"2.0.0\" is not supported"},
		{"index schema", archive(t, []entry{magic, {name: "index.json", body: `{"schemaVersion":1}`}, blob}, true), "schema version 1"},
		{"corrupt blob", with(entry{name: "blobs/sha256/" + strings.Repeat("a", 64), body: "not the content"}), "does not match its digest"},
		{"escape", with(entry{name: "../etc/passwd", body: "x"}), "unexpected entry"},
		{"absolute", with(entry{name: "/etc/passwd", body: "x"}), "unexpected entry"},
		{"dot-dot in blobs", with(entry{name: "blobs/sha256/../../../x", body: "x"}), "unexpected entry"},
		{"symlink", with(entry{name: "blobs/sha256/" + strings.Repeat("b", 64), typ: tar.TypeSymlink, link: "/etc/shadow"}), "unexpected entry"},
		{"hard link", with(entry{name: "blobs/sha256/" + strings.Repeat("b", 64), typ: tar.TypeLink, link: "index.json"}), "unexpected entry"},
		{"directory", with(entry{name: "blobs/", typ: tar.TypeDir}), "unexpected entry"},
		{"twice", with(blob), "twice"},
		{"no index", archive(t, []entry{magic, blob}, true), "no index.json"},
		{"missing manifest", archive(t, []entry{magic, index}, true), "lacks manifest " + md.String()},
		{"cut between entries", archive(t, good, false), "truncated"},
		{"cut inside a blob", whole[:len(whole)-2*512-2048], "truncated"},
		{"cut inside a header", whole[:len(whole)-2*512-4096-100], "truncated"},
		{"agent not recorded", archive(t, []entry{magic, agent, index, blob}, true), "does not record"},
		{"agent missing", archive(t, []entry{magic, agentIndex, blob}, true), "lacks its agent " + AgentEntry},
		{"agent corrupt", archive(t, []entry{magic, {name: AgentEntry, body: "tampered"}, agentIndex, blob}, true), "is corrupt: " + AgentEntry},
		{"agent out of place", archive(t, []entry{magic, agentIndex, agent, blob}, true), "out of place"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Open refuses the same disks, but finds a corrupt blob only when it is read.
			_, err := Open(context.Background(), bytes.NewReader(tc.disk))
			if tc.name == "corrupt blob" {
				err = readAllBlobs(t, tc.disk)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: err = %v, want %q", err, tc.want)
			}
			dir := t.TempDir()
			_, err = Extract(context.Background(), bytes.NewReader(tc.disk), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "etc")); err == nil {
				t.Error("an entry escaped the directory")
			}
		})
	}
	// The whole disk of the same entries is accepted: every refusal above is about its flaw.
	if _, err := Extract(context.Background(), bytes.NewReader(whole), t.TempDir()); err != nil {
		t.Errorf("whole disk: %v", err)
	}
	if _, err := Extract(context.Background(), bytes.NewReader(archive(t, []entry{magic, agent, agentIndex, blob}, true)), t.TempDir()); err != nil {
		t.Errorf("disk with its agent: %v", err)
	}
}

// TestAgentEntry writes a disk with an agent and reads the agent back the way the node's
// phase script does (GNU tar, stopping at the first occurrence), then unpacks the images.
func TestAgentEntry(t *testing.T) {
	dir := t.TempDir()
	images := testLayout(t, dir)
	agent := filepath.Join(t.TempDir(), "snofactory")
	body := make([]byte, 3<<20)
	rand.Read(body)
	if err := os.WriteFile(agent, body, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := AddAgent(dir, agent); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "disk.tar")
	if _, err := Write(context.Background(), dir, disk, nil); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("tar", "-tvf", disk)
	list, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(list)), "\n")
	if len(lines) < 3 || !strings.HasSuffix(lines[1], " "+AgentEntry) || !strings.HasPrefix(lines[1], "-r-xr-xr-x") {
		t.Fatalf("the agent is not the second entry, executable:\n%s", list)
	}
	if b, err := exec.Command("tar", "-xf", disk, "--occurrence=1", "-C", out, AgentEntry).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	got, err := os.ReadFile(filepath.Join(out, AgentEntry))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("agent read back by tar differs (err %v)", err)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ext := t.TempDir()
	back, err := Extract(context.Background(), f, ext)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, images) {
		t.Errorf("images = %v, want %v", back, images)
	}
	if _, err := os.Stat(filepath.Join(ext, AgentEntry)); !os.IsNotExist(err) {
		t.Errorf("Extract stored the agent (%v); the images do not need it", err)
	}
}

// readAllBlobs opens disk and reads every blob it holds.
func readAllBlobs(t *testing.T, disk []byte) error {
	t.Helper()
	d, err := Open(context.Background(), bytes.NewReader(disk))
	if err != nil {
		return err
	}
	for dg := range d.spans {
		rc, _, err := d.Blob(dg)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			return err
		}
	}
	return nil
}

// readCounter counts the bytes read from a disk file, not those seeked past.
type readCounter struct {
	*os.File
	n int64
}

func (r *readCounter) Read(b []byte) (int, error) {
	n, err := r.File.Read(b)
	r.n += int64(n)
	return n, err
}

// TestOpen reads a disk in place: every blob of every image comes back whole from its
// offset, and indexing reads the headers, not the blobs.
func TestOpen(t *testing.T) {
	src := t.TempDir()
	images := testLayout(t, src)
	disk := filepath.Join(t.TempDir(), "precache.tar")
	if _, err := Write(context.Background(), src, disk, nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc := &readCounter{File: f}
	d, err := Open(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Images(), images) {
		t.Errorf("Images() = %v, want %v", d.Images(), images)
	}
	files := layoutFilesOf(t, src)
	var blobBytes int64
	for name, content := range files {
		dg, ok := strings.CutPrefix(name, "blobs/sha256/")
		if !ok {
			continue
		}
		blobBytes += int64(len(content))
		got, err := d.ReadBlob(digest.NewDigestFromEncoded(digest.SHA256, dg))
		if err != nil || string(got) != content {
			t.Errorf("blob %s: %v (%d bytes, want %d)", dg, err, len(got), len(content))
		}
	}
	if rc.n >= blobBytes {
		t.Errorf("indexing read %d bytes; the blobs are %d: it read them instead of seeking", rc.n, blobBytes)
	}
	if _, _, err := d.Blob(digest.FromString("absent")); err == nil || !strings.Contains(err.Error(), "holds no blob") {
		t.Errorf("absent blob: %v", err)
	}
}
