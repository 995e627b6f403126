package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/imageimport"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// factsConfig is an Ignition config as render writes it for the conformance OS: files,
// a directory, a link, units with a drop-in, and a user with a key.
const factsConfig = `{"ignition":{"version":"3.3.0"},
"storage":{"files":[{"path":"/etc/motd","mode":420,"contents":{"source":"data:,hello"}},
  {"path":"/usr/local/bin/tool","mode":493},{"path":"/etc/missing"}],
 "directories":[{"path":"/var/lib/app","mode":448}],
 "links":[{"path":"/etc/localtime","target":"/usr/share/zoneinfo/UTC"}]},
"systemd":{"units":[{"name":"app.service","enabled":true,"contents":"[Unit]\n","dropins":[{"name":"10-env.conf","contents":"x"},{"name":"20-gone.conf"}]},
  {"name":"other.service","enabled":true,"contents":"[Unit]\n"},
  {"name":"off.service","enabled":false},{"name":"masked.service","mask":true}]},
"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAkey core@x"]},{"name":"ghost"}]}}`

type tree struct {
	t    *testing.T
	root string
}

func (tr tree) file(p, body string, mode os.FileMode) {
	tr.t.Helper()
	full := filepath.Join(tr.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), mode); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Chmod(full, mode); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr tree) link(p, target string) {
	tr.t.Helper()
	full := filepath.Join(tr.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		tr.t.Fatal(err)
	}
}

// fakeInstalled lays out an installed root as the conformance OS's first boot leaves it,
// and the /proc and /sys of a node that booted it from /dev/vda1.
func fakeInstalled(t *testing.T, cmdline string) (FactsOptions, string) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "disk", "root")
	tr := tree{t, root}
	tr.file("/etc/motd", "hello", 0o644)
	tr.file("/usr/local/bin/tool", "#!/bin/sh\n", 0o750) // config says 0755
	if err := os.MkdirAll(filepath.Join(root, "var/lib/app"), 0o700); err != nil {
		t.Fatal(err)
	}
	tr.link("/etc/localtime", "/usr/share/zoneinfo/UTC")
	tr.file("/etc/systemd/system/app.service", "[Unit]\n", 0o644)
	tr.file("/etc/systemd/system/app.service.d/10-env.conf", "x", 0o644)
	tr.file("/etc/systemd/system/other.service", "[Unit]\n", 0o644)
	tr.link("/etc/systemd/system/multi-user.target.wants/other.service", "/etc/systemd/system/other.service")
	tr.link("/etc/systemd/system/masked.service", "/dev/null")
	tr.file("/etc/systemd/system-preset/20-ignition.preset", "enable app.service\ndisable off.service\n", 0o644)
	tr.file("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n", 0o644)
	tr.file("/etc/group", "root:x:0:\ncore:x:1000:\n", 0o644)
	tr.file("/home/core/.ssh/authorized_keys.d/ignition", "ssh-ed25519 AAAAkey core@x\n", 0o600)
	tr.file("/etc/chrony.conf", "pool 2.pool.ntp.org iburst\n", 0o644)
	tr.file("/opt/openshift/.bootkube.done", "", 0o644)
	tr.file("/var/lib/kubelet/pki/kubelet-client-current.pem", testCertPEM(t, 30*24*time.Hour)+"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n", 0o600)
	if err := os.Chown(filepath.Join(root, "etc/motd"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	boot := filepath.Join(base, "disk", "boot")
	tree{t, boot}.file("/ignition.firstboot", "", 0o644)

	sys := filepath.Join(base, "sys")
	st := tree{t, sys}
	st.file("/proc/cmdline", cmdline+"\n", 0o644)
	st.file("/proc/self/mountinfo", fmt.Sprintf(
		"1 0 0:2 / / rw - rootfs rootfs rw\n"+
			"20 1 253:1 / %s rw,relatime - ext4 /dev/vda1 rw\n"+
			"21 1 0:20 / /run rw - tmpfs tmpfs rw\n", filepath.Join(base, "disk")), 0o644)
	st.file("/sys/devices/virtio1/block/vda/size", "16777216\n", 0o644)
	st.file("/sys/devices/virtio1/block/vda/vda1/size", "16775168\n", 0o644)
	st.file("/sys/devices/virtio1/block/vda/vda1/partition", "1\n", 0o644)
	st.link("/sys/class/block/vda", "../../devices/virtio1/block/vda")
	st.link("/sys/class/block/vda1", "../../devices/virtio1/block/vda/vda1")

	cfg := filepath.Join(base, "config.ign")
	if err := os.WriteFile(cfg, []byte(factsConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return FactsOptions{Root: root, BootDir: boot, IgnitionConfig: cfg, SysRoot: sys,
		Clock: clocktest.New(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))}, base
}

func testCertPEM(t *testing.T, life time.Duration) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nb := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:sno", Organization: []string{"system:nodes"}},
		NotBefore: nb, NotAfter: nb.Add(life)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestGatherFacts(t *testing.T) {
	o, _ := fakeInstalled(t, "BOOT_IMAGE=/boot/vmlinuz snofactory.root=LABEL=sfroot console=ttyS0")
	f, err := GatherFacts(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]wire.FileFact{}
	for _, ff := range f.Files {
		files[ff.Path] = ff
	}
	wantFiles := []wire.FileFact{
		{Path: "/etc/motd", Declared: wire.KindFile, Exists: true, Kind: wire.KindFile, Mode: 0o644, UID: 1000, GID: 1000, User: "core", Group: "core", SHA256: sha("hello"), Size: 5},
		{Path: "/usr/local/bin/tool", Declared: wire.KindFile, Exists: true, Kind: wire.KindFile, Mode: 0o750, User: "root", Group: "root", SHA256: sha("#!/bin/sh\n"), Size: 10},
		{Path: "/etc/missing", Declared: wire.KindFile},
		{Path: "/var/lib/app", Declared: wire.KindDirectory, Exists: true, Kind: wire.KindDirectory, Mode: 0o700, User: "root", Group: "root"},
		{Path: "/etc/localtime", Declared: wire.KindLink, Exists: true, Kind: wire.KindLink, Mode: 0o777, User: "root", Group: "root", Target: "/usr/share/zoneinfo/UTC"},
	}
	for _, want := range wantFiles {
		if got := files[want.Path]; got != want {
			t.Errorf("file %s:\n got %+v\nwant %+v", want.Path, got, want)
		}
	}
	units := map[string]wire.UnitFact{}
	for _, u := range f.Units {
		units[u.Name] = u
	}
	tests := []struct {
		name                       string
		present, enabled, disabled bool
		masked                     bool
		by                         string
	}{
		{"app.service", true, true, false, false, "preset /etc/systemd/system-preset/20-ignition.preset"},
		{"other.service", true, true, false, false, "link /etc/systemd/system/multi-user.target.wants/other.service"},
		{"off.service", false, false, true, false, ""},
		{"masked.service", false, false, false, true, ""},
	}
	for _, tt := range tests {
		u := units[tt.name]
		if u.Present != tt.present || u.Enabled != tt.enabled || u.Disabled != tt.disabled || u.Masked != tt.masked || u.EnabledBy != tt.by {
			t.Errorf("unit %s: got %+v", tt.name, u)
		}
	}
	if d := units["app.service"].Dropins; len(d) != 2 || !d[0].Present || d[0].SHA256 != sha("x") || d[1].Present {
		t.Errorf("app.service drop-ins: %+v", d)
	}
	if len(f.Users) != 2 || !f.Users[0].Present || f.Users[0].UID != 1000 || f.Users[1].Present ||
		len(f.Users[0].AuthorizedKeys) != 1 || f.Users[0].AuthorizedKeys[0] != wire.SSHKeyHash("ssh-ed25519 AAAAkey other-comment") {
		t.Errorf("users: %+v", f.Users)
	}
	b := f.Boot
	if b.Live || b.Source != "/dev/vda1" || b.FSType != "ext4" || b.RootLabel != "sfroot" {
		t.Errorf("boot: %+v", b)
	}
	d := f.Disk
	if d.Disk != "/dev/vda" || d.DiskBytes != 16777216*512 || len(d.Partitions) != 1 || d.Partitions[0] != (wire.PartitionFact{Name: "vda1", Number: 1, Bytes: 16775168 * 512}) || d.FreeBytes == 0 || d.TotalBytes < d.FreeBytes {
		t.Errorf("disk: %+v", d)
	}
	leftovers := map[string]bool{}
	for _, l := range f.Leftovers {
		leftovers[l.Path] = l.Exists
	}
	if !leftovers["/opt/openshift"] || !leftovers["/opt/openshift/.bootkube.done"] || !leftovers["boot:/ignition.firstboot"] || leftovers["/etc/kubernetes/bootstrap-secrets"] {
		t.Errorf("leftovers: %v", leftovers)
	}
	if len(f.Clock.SyncConfigs) != 1 || f.Clock.SyncConfigs[0] != "/etc/chrony.conf" {
		t.Errorf("clock: %+v", f.Clock)
	}
	if len(f.Certs) != 1 || f.Certs[0].Name != wire.CertKubeletClient || f.Certs[0].NotAfter.Sub(f.Certs[0].NotBefore) != 30*24*time.Hour ||
		!strings.Contains(f.Certs[0].Subject, "system:node:sno") {
		t.Errorf("certs: %+v", f.Certs)
	}
	if !f.Time.Equal(o.Clock.Now()) || len(f.Errors) != 0 {
		t.Errorf("time %v, errors %v", f.Time, f.Errors)
	}
}

func TestGatherFactsLive(t *testing.T) {
	tests := []struct {
		name, cmdline, mountinfo string
	}{
		{"initramfs root", "coreos.liveiso=x", "1 0 0:2 / / rw - rootfs rootfs rw\n"},
		{"cd-rom", "", "1 0 0:2 / / rw - rootfs rootfs rw\n20 1 11:0 / %s ro - ext4 /dev/sr0 ro\n"},
		{"installer karg", "coreos.inst.install_dev=/dev/vda", "20 1 253:1 / %s rw - ext4 /dev/vda1 rw\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, base := fakeInstalled(t, tt.cmdline)
			mi := tt.mountinfo
			if strings.Contains(mi, "%s") {
				mi = fmt.Sprintf(mi, filepath.Join(base, "disk"))
			}
			if err := os.WriteFile(filepath.Join(o.SysRoot, "proc/self/mountinfo"), []byte(mi), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := GatherFacts(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !f.Boot.Live || f.Boot.LiveReason == "" {
				t.Errorf("boot %+v: want live with a reason", f.Boot)
			}
		})
	}
}

// TestGatherFactsImages reads a real containers-storage (vfs) that seeds/node/imageimport filled.
func TestGatherFactsImages(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := random.Layer(16<<10, types.OCILayer)
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), l)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	name := "registry.example.com/ocp/agent@" + d.String()
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{ocispec.AnnotationRefName: name})); err != nil {
		t.Fatal(err)
	}
	o, _ := fakeInstalled(t, "")
	store := t.TempDir()
	o.GraphRoot, o.RunRoot, o.Driver = filepath.Join(store, "graph"), filepath.Join(store, "run"), "vfs"
	if _, err := imageimport.ImportLayout(context.Background(), dir, imageimport.Options{GraphRoot: o.GraphRoot, RunRoot: o.RunRoot, Driver: "vfs"}); err != nil {
		t.Fatal(err)
	}
	f, err := GatherFacts(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if f.Images == nil || f.Images.Error != "" || len(f.Images.Images) != 1 {
		t.Fatalf("images: %+v", f.Images)
	}
	im := f.Images.Images[0]
	if im.Digest != d.String() || len(im.Names) != 1 || !strings.HasPrefix(im.Names[0], "registry.example.com/ocp/agent") {
		t.Errorf("image: %+v, want digest %s named %s", im, d, name)
	}
}

// TestFactsMessage sends facts through the Reporter and reads them back as the host does;
// a config with thousands of files is cut to fit one message and says so.
func TestFactsMessage(t *testing.T) {
	tests := []struct {
		name      string
		files     int
		truncated bool
	}{
		{"small", 3, false},
		{"huge", 5000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &wire.Facts{Version: wire.FactsVersion, Time: time.Unix(1700000000, 0).UTC()}
			for i := range tt.files {
				f.Files = append(f.Files, wire.FileFact{Path: fmt.Sprintf("/etc/some/long/directory/name/file-%05d.conf", i), Declared: wire.KindFile, Exists: true, SHA256: sha(fmt.Sprint(i))})
			}
			d, err := wire.FactsDetails(f)
			if err != nil {
				t.Fatal(err)
			}
			sysRoot, port := fakeNode(t)
			r := Reporter{Port: port, StateDir: t.TempDir(), SysRoot: sysRoot}
			if _, err := r.Report(context.Background(), wire.PhaseFacts, wire.StatusInfo, d); err != nil {
				t.Fatal(err)
			}
			fh, err := os.Open(port)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			m, err := wire.NewDecoder(fh).Next()
			if err != nil {
				t.Fatal(err)
			}
			got, err := wire.DecodeFacts(m)
			if err != nil {
				t.Fatal(err)
			}
			if tt.truncated != (got.Truncated["files"] == tt.files) {
				t.Errorf("truncated = %v, want files=%d recorded: %v", got.Truncated, tt.files, tt.truncated)
			}
			if !tt.truncated && len(got.Files) != tt.files {
				t.Errorf("got %d files, want %d", len(got.Files), tt.files)
			}
			if tt.truncated && (len(got.Files) == 0 || len(got.Files) >= tt.files) {
				t.Errorf("got %d of %d files after truncation", len(got.Files), tt.files)
			}
		})
	}
}
