package resolve

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/test/check"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/test/registry"
)

// layer returns a gzip tar layer holding files (path -> content).
func layer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o755, Size: int64(len(files[p])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[p]))
	}
	tw.Close()
	return static.NewLayer(buf.Bytes(), types.DockerLayer)
}

// push writes an image made of the given layers and returns repo@digest.
func push(t *testing.T, ref string, layers ...v1.Layer) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return registry.PushT(t, ref, img)
}

// fixture is a tiny release payload in a real registry.
type fixture struct {
	reg        *registry.Registry
	release    string
	components map[string]string // name -> pinned ref
	installer  string            // openshift-install content
	bundle     string
	related    string // pinned ref of the operator's related image
}

const streamJSON = `{"stream":"rhcos-4.16","architectures":{"x86_64":{"artifacts":{"metal":{"formats":{"iso":{"disk":{"location":"https://example.com/rhcos-live.x86_64.iso","sha256":"%s"}}}}}}}}`

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg := registry.StartT(t, registry.Options{})
	f := &fixture{reg: reg, components: map[string]string{}, installer: "#!/bin/sh\necho openshift-install 4.16.3\n"}
	base := layer(t, map[string]string{"etc/os-release": "ID=rhel\n"})
	for _, c := range []string{"cluster-version-operator", "etcd", "machine-os-images"} {
		f.components[c] = push(t, reg.Ref("ocp/"+c+":latest"), base, layer(t, map[string]string{"usr/bin/" + c: c}))
	}
	f.components["installer"] = push(t, reg.Ref("ocp/installer:latest"), base,
		layer(t, map[string]string{"usr/bin/openshift-install": "old"}),
		layer(t, map[string]string{"usr/bin/openshift-install": f.installer}))
	var is imageStream
	is.Kind = "ImageStream"
	is.Metadata.Name = "4.16.3"
	for _, n := range slices.Sorted(maps.Keys(f.components)) {
		tag := struct {
			Name string `json:"name"`
			From struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"from"`
		}{Name: n}
		tag.From.Kind, tag.From.Name = "DockerImage", f.components[n]
		is.Spec.Tags = append(is.Spec.Tags, tag)
	}
	refs, _ := json.Marshal(is)
	sum := sha256.Sum256([]byte("iso"))
	stream := fmt.Sprintf(streamJSON, hex.EncodeToString(sum[:]))
	bootimages := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\ndata:\n  releaseVersion: 4.16.3\n  stream: '" + stream + "'\n"
	push(t, reg.Ref("ocp/release:4.16.3"), base, layer(t, map[string]string{
		"release-manifests/image-references":                         string(refs),
		"release-manifests/release-metadata":                         `{"kind":"cincinnati-metadata-v0","version":"4.16.3","previous":["4.16.2"]}`,
		"release-manifests/0000_50_installer_coreos-bootimages.yaml": bootimages,
	}))
	f.release = reg.Ref("ocp/release:4.16.3")
	f.related = push(t, reg.Ref("operators/lvms-operator:v4.16"), base, layer(t, map[string]string{"usr/bin/lvms": "lvms"}))
	csv := "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: lvms-operator.v4.16.0\n  annotations:\n    containerImage: " +
		reg.Ref("operators/lvms-operator:v4.16") + "\nspec:\n  relatedImages:\n  - name: lvms-operator\n    image: " + reg.Ref("operators/lvms-operator:v4.16") + "\n"
	push(t, reg.Ref("operators/lvms-bundle:v4.16"), layer(t, map[string]string{"manifests/lvms-operator.clusterserviceversion.yaml": csv, "metadata/annotations.yaml": "annotations: {}\n"}))
	f.bundle = reg.Ref("operators/lvms-bundle:v4.16")
	return f
}

func (f *fixture) options() Options {
	return Options{
		Release:   f.release,
		Operators: []string{f.bundle},
		Images:    []string{f.components["etcd"]},
		Registry:  registries.Config{Insecure: []string{f.reg.Addr()}},
	}
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	out := t.TempDir()
	lock, err := Resolve(ctx, f.options(), Runtime{OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if lock.Release.Version != "4.16.3" || !strings.HasPrefix(lock.Release.Digest, "sha256:") {
		t.Errorf("release = %+v", lock.Release)
	}
	got := map[string]lockfile.LockedImage{}
	for _, im := range lock.Images {
		got[im.Source+"/"+im.Name] = im
		if !strings.HasSuffix(im.Ref, "@"+im.Digest) {
			t.Errorf("image %s: ref %s does not carry digest %s", im.Name, im.Ref, im.Digest)
		}
	}
	for n, ref := range f.components {
		if got["release/"+n].Ref != ref {
			t.Errorf("component %s: got %q, want %q", n, got["release/"+n].Ref, ref)
		}
	}
	if got["operator:"+f.bundle+"/lvms-operator"].Ref != f.related {
		t.Errorf("operator related image not pinned: %+v", lock.Images)
	}
	if _, ok := got["operator:"+f.bundle+"/bundle"]; !ok {
		t.Errorf("bundle itself missing from %+v", lock.Images)
	}
	if got["extra/"+f.components["etcd"]].Ref != f.components["etcd"] {
		t.Errorf("extra image missing: %+v", lock.Images)
	}
	if want := 1 + len(f.components) + 2 + 1; len(lock.Images) != want {
		t.Errorf("%d images, want %d", len(lock.Images), want)
	}
	if lock.ISO == nil || lock.ISO.URL != "https://example.com/rhcos-live.x86_64.iso" || len(lock.ISO.SHA256) != 64 {
		t.Errorf("iso = %+v", lock.ISO)
	}
	b, err := os.ReadFile(filepath.Join(out, InstallerPath))
	if err != nil || string(b) != f.installer {
		t.Fatalf("installer = %q, %v; want the topmost layer's %q", b, err, f.installer)
	}
	sum := sha256.Sum256(b)
	if lock.Installer.SHA256 != hex.EncodeToString(sum[:]) || lock.Installer.Ref != f.components["installer"] {
		t.Errorf("installer lock = %+v", lock.Installer)
	}

	// Same inputs, same lock, byte for byte.
	p1, p2 := filepath.Join(out, "a.json"), filepath.Join(out, "b.json")
	if err := WriteLock(p1, lock); err != nil {
		t.Fatal(err)
	}
	again, err := Resolve(ctx, f.options(), Runtime{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	WriteLock(p2, again)
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("two resolutions differ:\n%s\n%s", b1, b2)
	}
	if fi, err := os.Stat(p1); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("lock file: %v, %v; want mode 0644", fi, err)
	}
	read, err := ReadLock(p1)
	if err != nil {
		t.Fatal(err)
	}
	if d := lockfile.Verify(read, again); len(d) != 0 {
		t.Errorf("Verify of identical locks: %v", d)
	}

	// Move the release tag and an operator tag: Verify names each difference.
	push(t, f.reg.Ref("operators/lvms-operator:v4.16"), layer(t, map[string]string{"usr/bin/lvms": "lvms v2"}))
	moved, err := Resolve(ctx, f.options(), Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	d := lockfile.Verify(read, moved)
	if len(d) != 1 || !strings.Contains(d[0], "lvms-operator") {
		t.Errorf("Verify after moving a tag = %v", d)
	}
}

func TestResolveErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"not a release", Options{Release: f.components["etcd"], Registry: registries.Config{Insecure: []string{f.reg.Addr()}}}, "not a release image"},
		{"missing", Options{Release: f.reg.Ref("ocp/nothing:1"), Registry: registries.Config{Insecure: []string{f.reg.Addr()}}}, "ocp/nothing"},
		{"no release", Options{}, "nothing to resolve"},
		{"missing pull secret", Options{Release: f.release, Registry: registries.Config{PullSecret: "pull-secret"}}, "pull secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(ctx, tc.opts, Runtime{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestExtractFileWhiteout(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	bin := map[string]string{"usr/bin/openshift-install": "v1"}
	tests := []struct {
		name   string
		layers []map[string]string
		want   string // content, or "" for not found
	}{
		{"top layer wins", []map[string]string{bin, {"usr/bin/openshift-install": "v2"}}, "v2"},
		{"lower layer, top untouched", []map[string]string{bin, {"etc/motd": "hi"}}, "v1"},
		{"deleted by a whiteout", []map[string]string{bin, {"usr/bin/.wh.openshift-install": ""}}, ""},
		{"deleted by an opaque dir", []map[string]string{bin, {"usr/bin/.wh..wh..opq": "", "usr/bin/other": "x"}}, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, im := openLayered(t, reg, fmt.Sprintf("ocp/installer%d:1", i), tc.layers)
			dst := filepath.Join(t.TempDir(), "openshift-install")
			_, err := c.extractFile(context.Background(), im, "/usr/bin/openshift-install", dst)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "has no") {
					t.Fatalf("err = %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(dst); string(b) != tc.want {
				t.Errorf("extracted %q, want %q", b, tc.want)
			}
		})
	}
}

// openLayered pushes an image of the given layers (path -> content each) to repo and opens
// it through a resolve client.
func openLayered(t *testing.T, reg *registry.Registry, repo string, layers []map[string]string) (*client, *image) {
	t.Helper()
	var ls []v1.Layer
	for _, l := range layers {
		ls = append(ls, layer(t, l))
	}
	ref := push(t, reg.Ref(repo), ls...)
	var cl pipeline.Cleanups
	t.Cleanup(func() { cl.Run() })
	sys, err := registries.SystemContext(context.Background(), t.TempDir(), registries.Config{Insecure: []string{reg.Addr()}}, nil, "x86_64", &cl)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{sys: sys}
	im, err := c.open(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return c, im
}

// TestExtractFileSidecar: the sidecar comes from the layers the search reads, topmost copy
// first, and a whiteout above hides it.
func TestExtractFileSidecar(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	const iso, side = "coreos/coreos-x86_64.iso", "coreos/coreos-x86_64.iso.sha256"
	tests := []struct {
		name     string
		layers   []map[string]string
		wantSide string // "" for none
	}{
		{"same layer", []map[string]string{{iso: "i", side: "s1"}}, "s1"},
		{"none", []map[string]string{{iso: "i"}}, ""},
		{"above the file", []map[string]string{{iso: "i", side: "s1"}, {side: "s2"}}, "s2"},
		{"whited out above", []map[string]string{{iso: "i", side: "s1"}, {"coreos/.wh.coreos-x86_64.iso.sha256": ""}}, ""},
		{"below the file is not read", []map[string]string{{side: "s0"}, {iso: "i"}}, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, im := openLayered(t, reg, fmt.Sprintf("ocp/mos%d:1", i), tc.layers)
			dst := filepath.Join(t.TempDir(), "live.iso")
			sum, got, err := c.extractFileWith(context.Background(), im, "/"+iso, dst, "/"+side)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Encoded() != sha256hex("i") {
				t.Errorf("sha256 %s, want that of %q", sum, "i")
			}
			if string(got) != tc.wantSide || (tc.wantSide == "") != (got == nil) {
				t.Errorf("sidecar %q, want %q", got, tc.wantSide)
			}
		})
	}
}

func TestStageLocked(t *testing.T) {
	f := newFixture(t)
	opts := f.options()
	good := filepath.Join(t.TempDir(), "lock.json")
	lock, err := Resolve(context.Background(), opts, Runtime{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLock(good, lock); err != nil {
		t.Fatal(err)
	}
	lock.Images[1].Digest = "sha256:" + strings.Repeat("0", 64)
	stale := filepath.Join(t.TempDir(), "lock.json")
	WriteLock(stale, lock)
	tests := []struct {
		name, lock, wantErr string
	}{
		{"matches", good, ""},
		{"moved", stale, "no longer match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			o.Locked = tc.lock
			out := t.TempDir()
			g := &pipeline.Graph{Blueprint: "locked", Stages: []pipeline.Stage{New(o)}}
			_, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: &pipeline.Cache{Dir: t.TempDir()}, OutputDir: out})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				b1, _ := os.ReadFile(tc.lock)
				b2, _ := os.ReadFile(filepath.Join(out, Name, lockfile.File))
				if !bytes.Equal(b1, b2) {
					t.Error("the stage's lock differs from the one it was locked to")
				}
				return
			}
			var lm *LockMismatchError
			if !errors.As(err, &lm) || !strings.Contains(err.Error(), tc.wantErr) || len(lm.Diffs) != 1 {
				t.Errorf("err = %v, want a LockMismatchError with one difference", err)
			}
		})
	}
}

// The signature policy is enforced on every image resolve opens (release, operator bundles,
// installer), since render runs the installer it extracts.
func TestResolvePolicy(t *testing.T) {
	f := newFixture(t)
	bundleRepo := strings.TrimSuffix(f.bundle, ":v4.16")
	tests := []struct {
		name, policy, wantErr string
	}{
		{"accept anything", `{"default":[{"type":"insecureAcceptAnything"}]}`, ""},
		{"reject all", `{"default":[{"type":"reject"}]}`, "signature policy rejects " + f.release},
		{"reject the operator bundle", `{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker":{"` + bundleRepo + `":[{"type":"reject"}]}}}`,
			"signature policy rejects " + f.bundle},
		{"unreadable policy", `{"default":[{"type":"no such requirement"}]}`, `policy.json: Unknown policy requirement type "no such requirement"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := f.options()
			opts.Registry.PolicyFile = filepath.Join(t.TempDir(), "policy.json")
			if err := os.WriteFile(opts.Registry.PolicyFile, []byte(tc.policy), 0o644); err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			lock, err := Resolve(context.Background(), opts, Runtime{OutDir: out})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if lock.Installer == nil || lock.Installer.SHA256 == "" {
					t.Errorf("installer not extracted: %+v", lock.Installer)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(out, InstallerPath)); tc.name == "reject all" && err == nil {
				t.Error("openshift-install was extracted from a rejected release")
			}
		})
	}
	// The policy's content is part of the stage's key; its host path is not an option.
	s := New(Options{Release: f.release, Registry: registries.Config{PolicyFile: "/etc/containers/policy.json", RegistriesConf: "/r.conf"}})
	if s.Files["policy.json"] != "/etc/containers/policy.json" || s.Files["registries.conf"] != "/r.conf" {
		t.Errorf("stage files = %v", s.Files)
	}
}

// A component that cannot be sized fails release info with that component named; the other
// sizings stop with it.
func TestReleaseInfoFails(t *testing.T) {
	f := newFixture(t)
	etcdRepo, _, _ := strings.Cut(f.components["etcd"], "@")
	policy := filepath.Join(t.TempDir(), "policy.json")
	os.WriteFile(policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker":{"`+etcdRepo+`":[{"type":"reject"}]}}}`), 0o644)
	tests := []struct {
		name, policy, wantErr string
	}{
		{"all sized", "", ""},
		// resolve only pins components by digest; sizing opens them, so the policy is met here.
		{"one component refused", policy, "sizing " + f.components["etcd"]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Release: f.release, Registry: registries.Config{Insecure: []string{f.reg.Addr()}, PolicyFile: tc.policy}}
			info, err := ReleaseInfo(context.Background(), opts, Runtime{Scratch: t.TempDir()}, 2)
			if check.Error(t, err, tc.wantErr) {
				return
			}
			if info.Components != len(f.components) || info.UniqueBlobs == 0 || info.TotalBlobBytes <= info.UniqueBlobBytes {
				t.Errorf("info = %+v", info)
			}
		})
	}
}

// secretFiles serves pipeline secrets from files.
type secretFiles map[string]string

func (s secretFiles) Secret(name string) ([]byte, error) { return os.ReadFile(s[name]) }

// The stage keeps its registry configuration, pull secret included, in the run's scratch
// directory: with no usable system temp directory it still runs.
func TestStageScratch(t *testing.T) {
	f := newFixture(t)
	opts := f.options()
	opts.Registry.PullSecret = "pull-secret"
	authFile := filepath.Join(t.TempDir(), "auth.json")
	os.WriteFile(authFile, []byte(`{"auths":{}}`), 0o600)
	cache, out := &pipeline.Cache{Dir: t.TempDir()}, t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	g := &pipeline.Graph{Blueprint: "scratch", Stages: []pipeline.Stage{New(opts)}}
	if _, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: cache, OutputDir: out, Secrets: secretFiles{"pull-secret": authFile}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLock(filepath.Join(out, Name, lockfile.File)); err != nil {
		t.Fatal(err)
	}
}

// A CoreOS-style target has no release: the lock pins its local live ISO and extra images.
func TestResolveWithoutRelease(t *testing.T) {
	f := newFixture(t)
	iso := filepath.Join(t.TempDir(), "live.iso")
	os.WriteFile(iso, []byte("not really an ISO"), 0o644)
	extra := f.reg.Ref("ocp/etcd:latest")
	lock, err := Resolve(context.Background(), Options{ISOPath: iso, Images: []string{extra}, Registry: registries.Config{Insecure: []string{f.reg.Addr()}}}, Runtime{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if lock.Release.Ref != "" || lock.Installer != nil {
		t.Errorf("lock has release parts: %+v", lock)
	}
	if lock.ISO == nil || lock.ISO.Path != iso || lock.ISO.SHA256 != sha256hex("not really an ISO") || lock.ISO.From != "blueprint" {
		t.Errorf("iso: %+v", lock.ISO)
	}
	if len(lock.Images) != 1 || lock.Images[0].Name != extra || !strings.Contains(lock.Images[0].Ref, "@sha256:") {
		t.Errorf("images: %+v", lock.Images)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
