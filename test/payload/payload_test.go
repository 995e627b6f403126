package payload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/test/registry"
)

func skopeo(t *testing.T, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Fatalf("skopeo not found: install the Debian package skopeo (make deps)")
	}
	var stderr bytes.Buffer
	cmd := exec.Command("skopeo", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fakeISO writes a small file standing in for the conformance ISO.
func fakeISO(t *testing.T) (path, sum string) {
	t.Helper()
	data := bytes.Repeat([]byte("CD001 synthetic iso "), 5000)
	path = filepath.Join(t.TempDir(), "conformance.iso")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, sha256Hex(data)
}

// layerTar reads the files of the last layer of an image in the registry.
func lastLayerFiles(t *testing.T, pullSpec string) map[string]*tarFile {
	t.Helper()
	ref, err := name.ParseReference(pullSpec)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull %s: %v", pullSpec, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tarFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: tar: %v", pullSpec, err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = &tarFile{mode: h.FileInfo().Mode(), data: data}
	}
	return files
}

type tarFile struct {
	mode fs.FileMode
	data []byte
}

func strictUnmarshal(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s does not parse: %v\n%s", what, err, data)
	}
}

func TestGenerateTiny(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	isoPath, isoSum := fakeISO(t)
	rel, err := Generate(context.Background(), reg.Addr(), Options{
		Size: Tiny, Seed: 1, MultiArch: true,
		ISO: ISO{Path: isoPath, Location: "http://127.0.0.1:1/conformance.iso"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release %s: %d components, %d unique blobs, %d unique bytes, %d total bytes, %s",
		rel.PullSpec, len(rel.Components), rel.UniqueBlobs, rel.UniqueBlobBytes, rel.TotalBlobBytes, rel.Elapsed)
	if len(rel.Components) != 40 {
		t.Fatalf("%d components, want the Tiny default 40", len(rel.Components))
	}
	if rel.UniqueBlobBytes > 8<<20 {
		t.Fatalf("Tiny payload is %d bytes, want a few MB", rel.UniqueBlobBytes)
	}

	// skopeo, an independent client, sees the same release.
	var inspect struct {
		Digest string
		Labels map[string]string
	}
	if err := json.Unmarshal(skopeo(t, "inspect", "--tls-verify=false", "docker://"+rel.Tag), &inspect); err != nil {
		t.Fatal(err)
	}
	if inspect.Digest != rel.Digest {
		t.Fatalf("skopeo: release tag is %s, Generate says %s", inspect.Digest, rel.Digest)
	}
	if inspect.Labels["io.openshift.release"] != rel.Version {
		t.Fatalf("release labels %v", inspect.Labels)
	}

	// Every component: the raw manifest skopeo reads hashes to the digest.
	oci, docker := 0, 0
	raws := map[string][]byte{}
	for _, c := range rel.Components {
		raw := skopeo(t, "inspect", "--raw", "--tls-verify=false", "docker://"+c.PullSpec)
		raws[c.Name] = raw
		if got := "sha256:" + sha256Hex(raw); got != c.Digest {
			t.Fatalf("%s: skopeo's manifest hashes to %s, want %s", c.Name, got, c.Digest)
		}
		var m struct {
			MediaType string `json:"mediaType"`
			Manifests []struct {
				Platform struct{ Architecture string }
			}
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.MediaType != string(c.MediaType) {
			t.Fatalf("%s: media type %s, want %s", c.Name, m.MediaType, c.MediaType)
		}
		if strings.Contains(m.MediaType, "oci") {
			oci++
		} else {
			docker++
		}
		if c.Name == NamePod {
			if len(m.Manifests) != 2 || len(c.Platforms) != 2 {
				t.Fatalf("pod should be a two-platform index: %s", raw)
			}
			out := skopeo(t, "inspect", "--tls-verify=false", "--override-arch", "arm64", "--format", "{{.Architecture}}", "docker://"+c.PullSpec)
			if strings.TrimSpace(string(out)) != "arm64" {
				t.Fatalf("pod arm64 variant: %s", out)
			}
		}
	}
	if oci == 0 || docker == 0 {
		t.Fatalf("mixed format gave %d OCI and %d schema2 manifests", oci, docker)
	}

	// Layers are real gzip tarballs whose diffIDs are what the configs say.
	for _, cname := range []string{NameInstaller, NameMachineOSImages, "cli"} {
		c, _ := rel.Component(cname)
		checkDiffIDs(t, c.PullSpec)
	}
	checkDiffIDs(t, rel.PullSpec)

	// The release-manifests files parse as the real formats.
	files := lastLayerFiles(t, rel.PullSpec)
	ir := files["release-manifests/image-references"]
	if ir == nil || !bytes.Equal(ir.data, rel.ImageReferences) {
		t.Fatalf("image-references missing or different in the release image")
	}
	var is ImageStream
	strictUnmarshal(t, "image-references", ir.data, &is)
	if is.Kind != "ImageStream" || is.APIVersion != "image.openshift.io/v1" || is.Metadata.Name != rel.Version {
		t.Fatalf("image-references header: %+v", is)
	}
	if len(is.Spec.Tags) != len(rel.Components) {
		t.Fatalf("%d tags, %d components", len(is.Spec.Tags), len(rel.Components))
	}
	for _, tag := range is.Spec.Tags {
		c, ok := rel.Component(tag.Name)
		if !ok || tag.From == nil || tag.From.Kind != "DockerImage" || tag.From.Name != c.Reference {
			t.Fatalf("tag %s: from %+v, component %+v", tag.Name, tag.From, c)
		}
		if _, err := name.NewDigest(tag.From.Name); err != nil {
			t.Fatalf("tag %s: %q is not a pull spec by digest: %v", tag.Name, tag.From.Name, err)
		}
	}
	var md CincinnatiMetadata
	strictUnmarshal(t, "release-metadata", files["release-manifests/release-metadata"].data, &md)
	if md.Kind != "cincinnati-metadata-v0" || md.Version != rel.Version || len(md.Previous) == 0 {
		t.Fatalf("release-metadata: %+v", md)
	}
	bi := files["release-manifests/"+BootImagesManifest]
	if bi == nil {
		t.Fatal("no coreos-bootimages manifest")
	}
	var cm ConfigMap
	if err := yaml.Unmarshal(bi.data, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "coreos-bootimages" || cm.Metadata.Namespace != "openshift-machine-config-operator" || cm.Data["releaseVersion"] != rel.Version {
		t.Fatalf("bootimages configmap: %+v", cm)
	}
	var stream Stream
	strictUnmarshal(t, "coreos stream", []byte(cm.Data["stream"]), &stream)
	disk := stream.Architectures["x86_64"].Artifacts["metal"].Formats["iso"]["disk"]
	if disk.Location != "http://127.0.0.1:1/conformance.iso" || disk.Sha256 != isoSum {
		t.Fatalf("stream iso disk %+v, want the given location and %s", disk, isoSum)
	}

	// installer: an executable stand-in that answers `version`.
	inst, _ := rel.Component(NameInstaller)
	ifiles := lastLayerFiles(t, inst.PullSpec)
	bin := ifiles["usr/bin/openshift-install"]
	if bin == nil || bin.mode&0o111 == 0 {
		t.Fatalf("installer layer lacks an executable usr/bin/openshift-install")
	}
	exe := filepath.Join(t.TempDir(), "openshift-install")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), exe+" "+rel.Version+"\n") {
		t.Fatalf("openshift-install version: %v\n%s", err, out)
	}

	// machine-os-images: the ISO, its checksum file and the stream.
	mos, _ := rel.Component(NameMachineOSImages)
	mfiles := lastLayerFiles(t, mos.PullSpec)
	if f := mfiles["coreos/coreos-x86_64.iso"]; f == nil || sha256Hex(f.data) != isoSum {
		t.Fatal("machine-os-images lacks the ISO or it differs")
	}
	if f := mfiles["coreos/coreos-x86_64.iso.sha256"]; f == nil || !strings.HasPrefix(string(f.data), isoSum+"  ") {
		t.Fatal("machine-os-images lacks coreos-x86_64.iso.sha256")
	}
	var mstream Stream
	strictUnmarshal(t, "coreos-stream.json", mfiles["coreos/coreos-stream.json"].data, &mstream)

	// The registry's storage holds exactly the unique blobs, once each.
	var stored int64
	var n int
	err = filepath.WalkDir(filepath.Join(reg.StorageDir(), "docker/registry/v2/blobs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() == "data" {
			fi, _ := d.Info()
			stored += fi.Size()
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The registry also stores each manifest as a blob.
	manifests := int64(0)
	mcount := 0
	for _, c := range rel.Components {
		raw := raws[c.Name]
		manifests += int64(len(raw))
		mcount++
		if c.Name == NamePod {
			var idx struct{ Manifests []struct{ Size int64 } }
			json.Unmarshal(raw, &idx)
			for _, m := range idx.Manifests {
				manifests += m.Size
				mcount++
			}
		}
	}
	relRaw := skopeo(t, "inspect", "--raw", "--tls-verify=false", "docker://"+rel.PullSpec)
	manifests += int64(len(relRaw))
	mcount++
	if stored != rel.UniqueBlobBytes+manifests || n != rel.UniqueBlobs+mcount {
		t.Fatalf("registry stores %d blobs / %d bytes, want %d / %d (+%d manifests, %d bytes)",
			n, stored, rel.UniqueBlobs+mcount, rel.UniqueBlobBytes+manifests, mcount, manifests)
	}
}

func TestLayerSharing(t *testing.T) {
	for _, n := range []int{40, 60, 150} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			o := Options{Components: n, Seed: int64(n)}
			if err := o.defaults(); err != nil {
				t.Fatal(err)
			}
			plans := plan(&o)
			use := map[string]int{}
			for _, p := range plans {
				seen := map[string]bool{}
				for _, k := range p.Layers {
					if seen[k] {
						t.Fatalf("%s has layer %s twice", p.Name, k)
					}
					seen[k] = true
					use[k]++
				}
			}
			frac := func(k string) float64 { return float64(use[k]) / float64(n) }
			if use["base/0"] != n {
				t.Fatalf("OS base layer in %d/%d images, want all", use["base/0"], n)
			}
			if f := frac("base/1"); f < 0.8 || f == 1 {
				t.Fatalf("openshift base layer in %.0f%% of images, want most but not all", 100*f)
			}
			if f := frac("base/2"); f < 0.4 || f > 0.85 {
				t.Fatalf("runtime layer in %.0f%% of images", 100*f)
			}
			mids, extras := 0, 0
			for k, c := range use {
				switch {
				case strings.HasPrefix(k, "mid/"):
					mids++
					if c < 2 || c > n/2 {
						t.Fatalf("mid layer %s shared by %d images, want a group", k, c)
					}
				case strings.HasPrefix(k, "top/"):
					if c != 1 {
						t.Fatalf("top layer %s in %d images, want 1", k, c)
					}
				case strings.HasPrefix(k, "extra/"):
					extras++
				}
			}
			if mids < 3 || extras == 0 {
				t.Fatalf("%d mid groups, %d extra layers", mids, extras)
			}
		})
	}
}

// Generated twice with the same options, a payload has the same digests;
// a different seed changes them.
func TestReproducible(t *testing.T) {
	gen := func(seed int64) *Release {
		reg := registry.StartT(t, registry.Options{})
		rel, err := Generate(context.Background(), reg.Addr(), Options{
			Size: Tiny, Components: 12, Seed: seed, ReferenceRegistry: "quay.io", Format: Docker,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	a, b, c := gen(5), gen(5), gen(6)
	if a.Digest != b.Digest || a.UniqueBlobBytes != b.UniqueBlobBytes {
		t.Fatalf("same seed, different release: %s vs %s", a.Digest, b.Digest)
	}
	for i := range a.Components {
		if a.Components[i].Digest != b.Components[i].Digest || a.Components[i].Reference != b.Components[i].Reference {
			t.Fatalf("%s differs between identical runs", a.Components[i].Name)
		}
		if !strings.HasPrefix(a.Components[i].Reference, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:") {
			t.Fatalf("reference %s does not use ReferenceRegistry", a.Components[i].Reference)
		}
	}
	if a.Digest == c.Digest {
		t.Fatal("different seeds gave the same release")
	}
	// Sharing makes the payload much smaller than the sum of its images.
	if ratio := float64(a.TotalBlobBytes) / float64(a.UniqueBlobBytes); ratio < 2 {
		t.Fatalf("dedup ratio %.2f, want >= 2", ratio)
	}
}

func TestGenerateBehindTLSAndAuth(t *testing.T) {
	reg := registry.StartT(t, registry.Options{TLS: true, Username: "u", Password: "p"})
	rel, err := Generate(context.Background(), reg.Addr(), Options{
		Size: Tiny, Components: 8, Format: OCI, Transport: reg.Transport(), Auth: basicAuth("u", "p"),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := skopeo(t, "inspect", "--cert-dir", reg.CertDir(), "--creds", "u:p", "--format", "{{.Digest}}", "docker://"+rel.Tag)
	if strings.TrimSpace(string(out)) != rel.Digest {
		t.Fatalf("skopeo sees %s, want %s", out, rel.Digest)
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, o := range []Options{
		{Components: 7},
		{Components: MaxComponents + 1},
		{Size: "huge"},
		{Format: "v1"},
		{Version: "4.18 beta"},
		{ISO: ISO{SHA256: "abc"}},
	} {
		if _, err := Generate(context.Background(), "127.0.0.1:1", o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func basicAuth(u, p string) authn.Authenticator { return &authn.Basic{Username: u, Password: p} }

func checkDiffIDs(t *testing.T, pullSpec string) {
	t.Helper()
	ref, _ := name.ParseReference(pullSpec)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	if len(layers) != len(cf.RootFS.DiffIDs) || len(cf.History) != len(layers) {
		t.Fatalf("%s: %d layers, %d diff_ids, %d history entries", pullSpec, len(layers), len(cf.RootFS.DiffIDs), len(cf.History))
	}
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(rc)
		if err != nil {
			t.Fatalf("%s layer %d is not gzip: %v", pullSpec, i, err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, zr); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != cf.RootFS.DiffIDs[i].String() {
			t.Fatalf("%s layer %d: uncompressed sha256 %s, config says %s", pullSpec, i, got, cf.RootFS.DiffIDs[i])
		}
	}
}

// TestMachineOSImagesOnly: NoBootImages drops the ConfigMap from the release, and
// ChecksumFile replaces the checksum next to the ISO in machine-os-images.
func TestMachineOSImagesOnly(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	isoPath, isoSum := fakeISO(t)
	rel, err := Generate(context.Background(), reg.Addr(), Options{
		Size: Tiny, Components: 8,
		ISO: ISO{Path: isoPath, NoBootImages: true, ChecksumFile: []byte("0000  coreos-x86_64.iso\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rel.BootImages != nil {
		t.Errorf("Release.BootImages is set without the ConfigMap")
	}
	rfiles := lastLayerFiles(t, rel.PullSpec)
	if rfiles["release-manifests/"+BootImagesManifest] != nil {
		t.Errorf("release carries %s", BootImagesManifest)
	}
	if rfiles["release-manifests/image-references"] == nil {
		t.Errorf("release lacks image-references: %v", rfiles)
	}
	mos, _ := rel.Component(NameMachineOSImages)
	mfiles := lastLayerFiles(t, mos.PullSpec)
	if f := mfiles["coreos/coreos-x86_64.iso"]; f == nil || sha256Hex(f.data) != isoSum {
		t.Error("machine-os-images lacks the ISO or it differs")
	}
	if f := mfiles["coreos/coreos-x86_64.iso.sha256"]; f == nil || string(f.data) != "0000  coreos-x86_64.iso\n" {
		t.Errorf("coreos-x86_64.iso.sha256 is not the given content: %+v", f)
	}
}
