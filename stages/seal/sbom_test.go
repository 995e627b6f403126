package seal

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/sbom"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

var agentSHA = strings.Repeat("5a", 32)

// sealInputs are upstream records as a conformance-OS build leaves them: a lock, two
// precached images, and validate's output with the node's inventory (nil: a validation
// that predates it).
func sealInputs(t *testing.T, inv *wire.Inventory) inputs {
	t.Helper()
	resolveDir, validateDir := t.TempDir(), t.TempDir()
	if err := lockfile.WriteLock(filepath.Join(resolveDir, lockfile.File), &lockfile.Lock{SchemaVersion: lockfile.SchemaVersion}); err != nil {
		t.Fatal(err)
	}
	in := inputs{
		resolve: handoff.Input[handoff.Resolve]{Dir: resolveDir, Out: handoff.Resolve{Lock: lockfile.File}},
		install: handoff.Input[handoff.Install]{Out: handoff.Install{Target: oskind.CoreOS, Firmware: seed.FirmwareBIOS}},
		precache: handoff.Input[handoff.Precache]{Out: handoff.Precache{Images: []handoff.Image{
			{Name: "demo-app", Ref: "127.0.0.1:5000/demo/app@sha256:" + strings.Repeat("1", 64), Digest: "sha256:" + strings.Repeat("1", 64)},
			{Name: "pause", Ref: "127.0.0.1:5000/demo/pause:3.9@sha256:" + strings.Repeat("2", 64), Digest: "sha256:" + strings.Repeat("2", 64)},
		}}},
		validate: handoff.Input[handoff.Validate]{Dir: validateDir, Out: handoff.Validate{Passed: 12}},
	}
	if inv != nil {
		b, err := json.Marshal(inv)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(validateDir, "inventory.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		in.validate.Out.Inventory = "inventory.json"
	}
	return in
}

// sealedDisk is a qcow2 disk as the seal's VM leaves it.
func sealedDisk(t *testing.T) string {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "raw.img")
	if err := os.WriteFile(raw, seedtest.RawDisk(4<<20, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-O", "qcow2", raw, work).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return work
}

func conformanceInventory() *wire.Inventory {
	return &wire.Inventory{
		Packages: &wire.PackageFacts{Manager: wire.ManagerDpkg, DistroID: "debian", DistroVersion: "12", Total: 2, Packages: []wire.PackageFact{
			{Name: "busybox-static", Version: "1:1.35.0-4+b3", Arch: "amd64"},
			{Name: "ignition", Version: "2.14.0-1+b5", Arch: "amd64"},
		}},
		Binaries: []wire.BinaryFact{
			{Path: wire.AgentPath, Installed: true, SHA256: agentSHA, Size: 9, Module: "github.com/snofactory/snofactory", Version: "v1.0.0"},
			{Path: "/bin/snofactory", SHA256: agentSHA, Size: 9, Module: "github.com/snofactory/snofactory", Version: "v1.0.0"},
		},
	}
}

// TestWriteSeedSBOM seals a disk into a seed directory and reads its SBOM back: the seed
// (its raw disk digest) described, its images, the node's packages and agent in it, its
// creation time the seed's (SOURCE_DATE_EPOCH); seed.json records it and verify checks it.
func TestWriteSeedSBOM(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), SeedDir)
	env := &pipeline.Env{Scratch: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
	opts := Options{Name: "demo", BlueprintDigest: "sha256:" + strings.Repeat("b", 64), Formats: []string{seed.FormatRaw},
		ReconfigurationAPIVersion: "snofactory.io/v1alpha1", SourceDateEpoch: "1700000000"}
	m, err := writeSeed(ctx, opts, sealInputs(t, conformanceInventory()), sealedDisk(t), dir, env)
	if err != nil {
		t.Fatal(err)
	}
	if m.SBOM == nil || m.SBOM.File != SBOMFile {
		t.Fatalf("manifest sbom = %+v", m.SBOM)
	}
	read, err := seed.ReadManifest(dir)
	if err != nil || !reflect.DeepEqual(read.SBOM, m.SBOM) {
		t.Fatalf("seed.json sbom = %+v (%v), want %+v", read.SBOM, err, m.SBOM)
	}
	if err := seed.Verify(ctx, dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
	f, err := os.Open(filepath.Join(dir, SBOMFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := sbom.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Error(err)
	}
	if doc.CreationInfo.Created != "2023-11-14T22:13:20Z" || !m.Created.Equal(mustTime(t, doc.CreationInfo.Created)) {
		t.Errorf("SBOM created %s, seed created %s: want both SOURCE_DATE_EPOCH", doc.CreationInfo.Created, m.Created)
	}
	described, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || len(described) != 1 {
		t.Fatalf("described %v: %v", described, err)
	}
	got := map[string]string{} // name: version
	for _, p := range doc.Packages {
		got[p.PackageName] = p.PackageVersion
		if p.PackageSPDXIdentifier == described[0] {
			if p.PackageName != "demo" || len(p.PackageChecksums) != 1 || "sha256:"+p.PackageChecksums[0].Value != m.Disks[0].RawDigest.String() {
				t.Errorf("root package %s, checksums %+v; want demo with the raw disk %s", p.PackageName, p.PackageChecksums, m.Disks[0].RawDigest)
			}
		}
		if p.PackageName == "snofactory" && (p.PackageFileName != wire.AgentPath || p.PackageChecksums[0] != (common.Checksum{Algorithm: common.SHA256, Value: agentSHA})) {
			t.Errorf("agent package: file %q, checksums %+v", p.PackageFileName, p.PackageChecksums)
		}
	}
	want := map[string]string{
		"demo":           "",
		"demo-app":       "sha256:" + strings.Repeat("1", 64),
		"pause":          "sha256:" + strings.Repeat("2", 64),
		"busybox-static": "1:1.35.0-4+b3",
		"ignition":       "2.14.0-1+b5",
		"snofactory":     "v1.0.0", // once: the live system's copy is not on the disk
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SBOM packages:\n got %v\nwant %v", got, want)
	}

	// The SBOM is a seed file like the others: a changed byte fails verification by name.
	b, _ := os.ReadFile(filepath.Join(dir, SBOMFile))
	b[len(b)/2] ^= 1
	if err := os.WriteFile(filepath.Join(dir, SBOMFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var mm *seed.MismatchError
	if err := seed.Verify(ctx, dir); !errors.As(err, &mm) || mm.File != SBOMFile {
		t.Errorf("verify after tampering with the SBOM: %v", err)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestWriteSeedSBOMOlderValidation: a validation cached before the inventory existed
// still seals, with an SBOM that lists the images and says why it has no OS packages.
func TestWriteSeedSBOMOlderValidation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), SeedDir)
	env := &pipeline.Env{Scratch: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
	opts := Options{Name: "demo", BlueprintDigest: "sha256:" + strings.Repeat("b", 64), Formats: []string{seed.FormatRaw},
		ReconfigurationAPIVersion: "snofactory.io/v1alpha1"}
	m, err := writeSeed(context.Background(), opts, sealInputs(t, nil), sealedDisk(t), dir, env)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, m.SBOM.File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := sbom.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Packages) != 3 || !strings.Contains(doc.DocumentComment, "recorded no inventory") {
		t.Errorf("%d packages, comment %q; want the seed and its 2 images, and why there are no OS packages", len(doc.Packages), doc.DocumentComment)
	}
}

// TestNodeBinaries: the conformance OS ships the agent its installer put on the root; an
// OpenShift seed the agent the seal installs, which is the one that reported the facts.
func TestNodeBinaries(t *testing.T) {
	installed := wire.BinaryFact{Path: wire.AgentPath, Installed: true, SHA256: "aa"}
	running := wire.BinaryFact{Path: "/run/snofactory/bin/snofactory", SHA256: "bb", Version: "v1"}
	tests := []struct {
		target oskind.Kind
		facts  []wire.BinaryFact
		want   []sbom.Binary
	}{
		{oskind.CoreOS, []wire.BinaryFact{installed, running}, []sbom.Binary{{Path: wire.AgentPath, SHA256: "aa"}}},
		{oskind.CoreOS, []wire.BinaryFact{running}, nil},
		{oskind.OpenShift, []wire.BinaryFact{running}, []sbom.Binary{{Path: wire.AgentPath, SHA256: "bb", Version: "v1"}}},
		{oskind.OpenShift, []wire.BinaryFact{installed, running}, []sbom.Binary{{Path: wire.AgentPath, SHA256: "bb", Version: "v1"}}},
	}
	for _, tt := range tests {
		if got := nodeBinaries(tt.target, tt.facts); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %+v: got %+v, want %+v", tt.target, tt.facts, got, tt.want)
		}
	}
}

// TestReadInventoryBounds refuses an inventory in validate's output that is not one.
func TestReadInventoryBounds(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, maxInventory+2)
	for name, body := range map[string][]byte{"bad.json": []byte(`{"packages": [`), "big.json": big} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
		v := handoff.Input[handoff.Validate]{Dir: dir, Out: handoff.Validate{Inventory: handoff.File(name)}}
		if _, err := readInventory(v); err == nil || !strings.Contains(err.Error(), "inventory") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}
