package resolve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	lock, err := Resolve(context.Background(), Options{Release: rel.Tag, Registry: Registry{Insecure: []string{reg.Addr()}}}, Runtime{OutDir: out})
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
	info, err := ReleaseInfo(context.Background(), Options{Release: rel.Tag, Registry: Registry{Insecure: []string{reg.Addr()}}}, Runtime{}, 4)
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
	lock, err := Resolve(context.Background(), Options{Release: tag, Registry: Registry{Insecure: []string{proxy.Addr()}}}, Runtime{OutDir: t.TempDir()})
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
