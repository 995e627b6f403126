package resolve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/test/check"

	"github.com/snofactory/snofactory/test/faultproxy"
	pl "github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
)

// TestResolveSyntheticPayload resolves a generated release with multi-block gzip layers
// (the drain after a partial tar read once panicked inside pgzip).
func TestResolveSyntheticPayload(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	rel, err := pl.Generate(context.Background(), reg.Addr(), pl.Options{Size: pl.Tiny, Components: 8})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	lock, err := Resolve(context.Background(), Options{Release: rel.Tag, Registry: registries.Config{Insecure: []string{reg.Addr()}}}, Runtime{OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if lock.Release.Digest != rel.Digest || lock.Release.Version != rel.Version || len(lock.Images) != len(rel.Components)+1 {
		t.Errorf("lock = %+v", lock)
	}
	if lock.ISO == nil || lock.ISO.SHA256 != rel.ISOSHA256 {
		t.Errorf("iso = %+v, want sha256 %s", lock.ISO, rel.ISOSHA256)
	}
	if fi, err := os.Stat(filepath.Join(out, InstallerPath)); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("openshift-install not extracted executable: %v", err)
	}
	info, err := ReleaseInfo(context.Background(), Options{Release: rel.Tag, Registry: registries.Config{Insecure: []string{reg.Addr()}}}, Runtime{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if info.Components != len(rel.Components) || info.UniqueBlobBytes != rel.UniqueBlobBytes || info.UniqueBlobs != rel.UniqueBlobs {
		t.Errorf("info = %+v; payload has %d components, %d unique blobs, %d bytes", info, len(rel.Components), rel.UniqueBlobs, rel.UniqueBlobBytes)
	}
}

// TestResolveThroughFaults resolves (and extracts the installer) through a proxy that fails a
// fifth of all requests: resets, 5xx, 429 and truncated bodies.
func TestResolveThroughFaults(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	proxy, err := faultproxy.Start(context.Background(), reg.Addr(), faultproxy.Options{Seed: 3, Rate: 0.2, MaxFaultsPerPath: 2,
		RetryAfter: time.Second, Kinds: []faultproxy.Kind{faultproxy.Reset, faultproxy.Error500, faultproxy.Error503, faultproxy.Error429RetryAfter, faultproxy.Truncate}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	rel, err := pl.Generate(context.Background(), reg.Addr(), pl.Options{Size: pl.Tiny, Components: 8, ReferenceRegistry: proxy.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	tag := strings.Replace(rel.Tag, reg.Addr(), proxy.Addr(), 1)
	lock, err := Resolve(context.Background(), Options{Release: tag, Registry: registries.Config{Insecure: []string{proxy.Addr()}}}, Runtime{OutDir: t.TempDir()})
	if err != nil {
		t.Fatalf("resolve through faults (%+v): %v", proxy.Stats(), err)
	}
	if st := proxy.Stats(); st.Total() == 0 {
		t.Fatalf("the proxy injected no faults: %+v", st)
	}
	inst, _ := rel.Component("installer")
	if lock.Release.Digest != rel.Digest || lock.Installer == nil || lock.Installer.Digest != inst.Digest || lock.Installer.SHA256 == "" {
		t.Errorf("lock = %+v installer %+v", lock.Release, lock.Installer)
	}
	t.Logf("faults injected: %v", proxy.Stats().Faults)
}

// TestResolveISOFromMachineOSImages resolves a release without a coreos-bootimages stream:
// the ISO is extracted from machine-os-images into the output, its sha256 goes into the lock,
// and a checksum file in the image that disagrees with the ISO fails the resolution.
func TestResolveISOFromMachineOSImages(t *testing.T) {
	isoData := bytes.Repeat([]byte("CD001 machine-os-images live iso "), 4000)
	isoFile := filepath.Join(t.TempDir(), "live.iso")
	if err := os.WriteFile(isoFile, isoData, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(isoData)
	isoSum := hex.EncodeToString(sum[:])
	reg := registry.StartT(t, registry.Options{})
	tests := []struct {
		name     string
		checksum []byte // the image's coreos-x86_64.iso.sha256; nil: the right one
		wantErr  string
	}{
		{"checksum file agrees", nil, ""},
		{"bare checksum", []byte(strings.ToUpper(isoSum) + "\n"), ""},
		{"checksum file disagrees", []byte(strings.Repeat("0", 64) + "  coreos-x86_64.iso\n"),
			"has sha256 " + isoSum + ", but /coreos/coreos-x86_64.iso.sha256 in the image says " + strings.Repeat("0", 64)},
		{"checksum file garbled", []byte("not-a-digest\n"), `"not-a-digest" is not a sha256 digest`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := pl.Generate(context.Background(), reg.Addr(), pl.Options{Size: pl.Tiny, Components: 8, Seed: int64(i),
				Version: fmt.Sprintf("4.19.%d-mos", i), ISO: pl.ISO{Path: isoFile, NoBootImages: true, ChecksumFile: tc.checksum}})
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			lock, err := Resolve(context.Background(), Options{Release: rel.Tag, Registry: registries.Config{Insecure: []string{reg.Addr()}}}, Runtime{OutDir: out})
			if check.Error(t, err, tc.wantErr) {
				return
			}
			mos, _ := rel.Component(pl.NameMachineOSImages)
			want := lockfile.LockedISO{URL: "image://" + mos.Reference + "#/coreos/coreos-x86_64.iso", Path: ISOPath, SHA256: isoSum, From: machineOSImages}
			if lock.ISO == nil || *lock.ISO != want {
				t.Fatalf("lock iso = %+v, want %+v", lock.ISO, want)
			}
			got, err := os.ReadFile(filepath.Join(out, ISOPath))
			if err != nil || !bytes.Equal(got, isoData) {
				t.Fatalf("extracted ISO differs (%d bytes, want %d): %v", len(got), len(isoData), err)
			}
			if fi, _ := os.Stat(filepath.Join(out, ISOPath)); fi.Mode().Perm() != 0o644 {
				t.Errorf("extracted ISO mode %v, want 0644", fi.Mode())
			}
			// The lock round-trips and a resolution without an output (nothing extracted)
			// still matches it: the image digest in the URL pins the content.
			if err := WriteLock(filepath.Join(out, lockfile.File), lock); err != nil {
				t.Fatal(err)
			}
			read, err := ReadLock(filepath.Join(out, lockfile.File))
			if err != nil {
				t.Fatal(err)
			}
			bare, err := Resolve(context.Background(), Options{Release: rel.Tag, Registry: registries.Config{Insecure: []string{reg.Addr()}}}, Runtime{})
			if err != nil {
				t.Fatal(err)
			}
			if bare.ISO == nil || bare.ISO.SHA256 != "" || bare.ISO.Path != "" {
				t.Errorf("resolution without an output extracted: %+v", bare.ISO)
			}
			if d := lockfile.Verify(read, bare); len(d) != 0 {
				t.Errorf("Verify = %q", d)
			}
		})
	}
}
