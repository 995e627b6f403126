package seal

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/fit"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/test/check"
)

// The credentials reach the seed only encrypted, 0600, and decrypt with the recipient's
// identity to the installer's files; without recipients nothing ships.
func TestCredentials(t *testing.T) {
	renderDir, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(renderDir, "kubeconfig"), []byte("apiVersion: v1\nclient-key-data: SECRETKEY\n"), 0o600)
	os.WriteFile(filepath.Join(renderDir, "kubeadmin-password"), []byte("SECRETPASSWORD"), 0o600)
	in := inputs{render: handoff.Input[handoff.Render]{Dir: renderDir, Out: handoff.Render{Kubeconfig: "kubeconfig", KubeadminPassword: "kubeadmin-password"}}}
	env := &pipeline.Env{Log: slog.New(slog.DiscardHandler)}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	c, err := writeCredentials(context.Background(), in, dir, []string{id.Recipient().String()}, env)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, CredentialsFile)
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 || c.Size != fi.Size() || c.File != CredentialsFile {
		t.Fatalf("credentials file %v %v, record %+v", fi, err, c)
	}
	enc, _ := os.ReadFile(p)
	if bytes.Contains(enc, []byte("SECRET")) {
		t.Fatal("the credentials bundle holds the secrets in clear")
	}
	r, err := age.Decrypt(bytes.NewReader(enc), id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if got["kubeadmin-password"] != "SECRETPASSWORD" || !strings.Contains(got["kubeconfig"], "SECRETKEY") {
		t.Errorf("decrypted bundle = %v", got)
	}
	if c, err := writeCredentials(context.Background(), in, t.TempDir(), nil, env); c != nil || err != nil {
		t.Errorf("without recipients: %+v, %v", c, err)
	}
	if _, err := writeCredentials(context.Background(), in, t.TempDir(), []string{"age1notakey"}, env); err == nil {
		t.Error("a malformed recipient was accepted")
	}
}

// Every format comes out of one sealed disk with the same raw bytes; the zeros and holes of
// the disk stay out of the files.
func TestWriteDisks(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work.qcow2")
	raw := filepath.Join(t.TempDir(), "raw.img")
	if err := os.WriteFile(raw, seedtest.RawDisk(8<<20, 7), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-O", "qcow2", raw, work).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	dir := t.TempDir()
	env := &pipeline.Env{Scratch: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
	disks, err := writeDisks(context.Background(), work, dir, []string{seed.FormatQCOW2, seed.FormatRaw, seed.FormatChunked}, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(disks) != 3 || disks[0].RawDigest != disks[1].RawDigest || disks[1].RawDigest != disks[2].RawDigest ||
		disks[1].Compression != seed.CompressionZstd || disks[0].VirtualSize != 8<<20 || disks[2].VirtualSize != 8<<20 {
		t.Fatalf("disks = %+v", disks)
	}
	if disks[2].Index == nil || disks[2].File != PackFile || disks[2].Index.File != IndexFile {
		t.Fatalf("chunked disk = %+v", disks[2])
	}
	// The scratch raw disk is gone, and the pack is private like every seed disk.
	if entries, _ := os.ReadDir(env.Scratch); len(entries) != 0 {
		t.Errorf("scratch holds %d files after sealing", len(entries))
	}
	if fi, err := os.Stat(filepath.Join(dir, PackFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("pack: %v, %v", fi, err)
	}
	for _, d := range disks {
		if d.Size >= d.VirtualSize {
			t.Errorf("%s is %d bytes for a %d-byte disk with holes", d.File, d.Size, d.VirtualSize)
		}
	}
	if _, err := writeDisks(context.Background(), work, dir, []string{"vmdk"}, env); err == nil {
		t.Error("an unknown format was accepted")
	}
}

// An OpenShift seed gets the pinned recert and etcd images its site reconfiguration runs;
// a lock without them is refused before anything boots. A coreos seed's seal clamps file
// times to SOURCE_DATE_EPOCH.
func TestSealRequestImages(t *testing.T) {
	fit := &seedfit.Record{Version: seedfit.Version}
	const recert = "registry.example/edge-infrastructure/recert:v0"
	pinned := func(name, ref string) lockfile.LockedImage {
		return lockfile.LockedImage{Name: name, Ref: ref, Digest: "sha256:" + strings.Repeat("1", 64)}
	}
	for _, tc := range []struct {
		name    string
		target  oskind.Kind
		images  []lockfile.LockedImage
		epoch   string // SOURCE_DATE_EPOCH
		want    wire.SealRequest
		wantErr string
	}{
		{"coreos needs neither", "coreos", nil, "", wire.SealRequest{Version: 1, Target: "coreos", SiteConfigTimeout: "20s", Fit: fit}, ""},
		{"coreos with SOURCE_DATE_EPOCH", "coreos", nil, "1700000000",
			wire.SealRequest{Version: 1, Target: "coreos", SiteConfigTimeout: "20s", SourceDateEpoch: 1700000000, Fit: fit}, ""},
		{"coreos with a bad SOURCE_DATE_EPOCH", "coreos", nil, "today", wire.SealRequest{}, "SOURCE_DATE_EPOCH"},
		{"openshift", "openshift", []lockfile.LockedImage{pinned(recert, "registry.example/edge-infrastructure/recert@sha256:aa"), pinned("etcd", "quay.io/ocp/etcd@sha256:bb")}, "1700000000",
			wire.SealRequest{Version: 1, Target: "openshift", SiteConfigTimeout: "20s", RecertImage: "registry.example/edge-infrastructure/recert@sha256:aa", EtcdImage: "quay.io/ocp/etcd@sha256:bb", RequiredFiles: []string{"/etc/x"}, Fit: fit}, ""},
		{"openshift without recert", "openshift", []lockfile.LockedImage{pinned("etcd", "quay.io/ocp/etcd@sha256:bb")}, "", wire.SealRequest{}, "no recert image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := lockfile.WriteLock(filepath.Join(dir, lockfile.File), &lockfile.Lock{SchemaVersion: lockfile.SchemaVersion, Images: tc.images}); err != nil {
				t.Fatal(err)
			}
			in := inputs{resolve: handoff.Input[handoff.Resolve]{Dir: dir, Out: handoff.Resolve{Lock: lockfile.File}},
				install: handoff.Input[handoff.Install]{Out: handoff.Install{Target: tc.target}}}
			got, err := sealRequest(Options{RecertImage: recert, SiteConfigTimeout: 20 * time.Second, RelocationFiles: []string{"/etc/x"}, SourceDateEpoch: tc.epoch}, in)
			if check.Error(t, err, tc.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("request = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The seed's record of what a site must match comes from the rendered install-config and
// the locked release, and the node's sealed request keeps the same record.
func TestSiteFit(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		render  handoff.Render
		release lockfile.LockedRelease
		want    seedfit.Record
		wantErr string
	}{
		{"conformance OS: no proxy to compare", handoff.Render{Target: oskind.CoreOS}, lockfile.LockedRelease{}, seedfit.Record{Version: 2}, ""},
		{"single-stack IPv4", handoff.Render{Target: oskind.OpenShift, MachineNetwork: []string{"192.168.127.0/24"}},
			lockfile.LockedRelease{Ref: "quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64", Version: "4.18.3"},
			seedfit.Record{Version: 2, IPFamilies: []string{"ipv4"}, ReleaseVersion: "4.18.3", ReleaseRegistry: "quay.io", Proxy: &no}, ""},
		{"dual-stack IPv6 first, FIPS", handoff.Render{Target: oskind.OpenShift, MachineNetwork: []string{"fd00:127::/64", "192.168.127.0/24"}, FIPS: true},
			lockfile.LockedRelease{Ref: "depot.example:5000/ocp/release@sha256:aa", Version: "4.18.3"},
			seedfit.Record{Version: 2, IPFamilies: []string{"ipv4", "ipv6"}, FIPS: true, ReleaseVersion: "4.18.3", ReleaseRegistry: "depot.example:5000", Proxy: &no}, ""},
		{"a separate container-storage partition", handoff.Render{Target: oskind.OpenShift, MachineNetwork: []string{"192.168.127.0/24"}, ContainerStorageLabel: "var-lib-containers"},
			lockfile.LockedRelease{},
			seedfit.Record{Version: 2, IPFamilies: []string{"ipv4"}, ContainerStorageLabel: "var-lib-containers", Proxy: &no}, ""},
		{"behind a proxy", handoff.Render{Target: oskind.OpenShift, MachineNetwork: []string{"192.168.127.0/24"}, Proxy: true},
			lockfile.LockedRelease{Version: "4.18.3"},
			seedfit.Record{Version: 2, IPFamilies: []string{"ipv4"}, ReleaseVersion: "4.18.3", Proxy: &yes}, ""},
		{"a network that is no CIDR", handoff.Render{MachineNetwork: []string{"192.168.127.0"}}, lockfile.LockedRelease{}, seedfit.Record{}, "machine network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := siteFit(tc.render, handoff.Install{}, tc.release)
			if check.Error(t, err, tc.wantErr) {
				return
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("record = %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// A conformance seed with a container-storage partition records its label as an OpenShift
// seed does: the conformance installer made the partition, and the install stage's record
// names it (render has none for the conformance OS).
func TestSiteFitCoreOSContainerStorage(t *testing.T) {
	for _, tc := range []struct {
		name string
		inst handoff.Install
		want string
	}{
		{"with the partition", handoff.Install{Target: oskind.CoreOS, ContainerStorageLabel: "var-lib-containers"}, "var-lib-containers"},
		{"without", handoff.Install{Target: oskind.CoreOS}, ""},
	} {
		rec, err := siteFit(handoff.Render{Target: oskind.CoreOS}, tc.inst, lockfile.LockedRelease{})
		if err != nil {
			t.Fatal(err)
		}
		if rec.ContainerStorageLabel != tc.want {
			t.Errorf("%s: recorded container storage %q, want %q", tc.name, rec.ContainerStorageLabel, tc.want)
		}
		if got := rec.Summary(); (tc.want != "") != strings.Contains(got, "container storage on "+tc.want) {
			t.Errorf("%s: summary %q", tc.name, got)
		}
	}
}

// A seed whose install-config had a proxy serves a site with a proxy and refuses one
// without; a seed without, the reverse; a conformance seed, both.
func TestProxySeedFit(t *testing.T) {
	withProxy := &siteconfig.SiteConfig{Spec: siteconfig.Spec{Hostname: "edge", Proxy: &siteconfig.Proxy{HTTPProxy: "http://proxy.site.example:3128"}}}
	without := &siteconfig.SiteConfig{Spec: siteconfig.Spec{Hostname: "edge"}}
	for _, tc := range []struct {
		name            string
		render          handoff.Render
		serves, refuses []*siteconfig.SiteConfig
	}{
		{"openshift behind a proxy", handoff.Render{Target: oskind.OpenShift, Proxy: true}, []*siteconfig.SiteConfig{withProxy}, []*siteconfig.SiteConfig{without}},
		{"openshift without", handoff.Render{Target: oskind.OpenShift}, []*siteconfig.SiteConfig{without}, []*siteconfig.SiteConfig{withProxy}},
		{"conformance OS", handoff.Render{Target: oskind.CoreOS}, []*siteconfig.SiteConfig{withProxy, without}, nil},
	} {
		rec, err := siteFit(tc.render, handoff.Install{}, lockfile.LockedRelease{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range tc.serves {
			if err := fit.Check(rec, sc); err != nil {
				t.Errorf("%s: refused a site (proxy %v): %v", tc.name, sc.HasProxy(), err)
			}
		}
		for _, sc := range tc.refuses {
			if err := fit.Check(rec, sc); err == nil || !strings.Contains(err.Error(), "spec.proxy") {
				t.Errorf("%s: site (proxy %v): %v, want a spec.proxy refusal", tc.name, sc.HasProxy(), err)
			}
		}
	}
}
