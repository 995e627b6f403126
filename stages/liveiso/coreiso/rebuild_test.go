package coreiso

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
	"github.com/snofactory/snofactory/test/testbin"
)

// bigConfig is a valid Ignition config that xz cannot squeeze into 256 KiB,
// like a bootstrap-in-place config carrying certificates and manifests.
func bigConfig(size int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, size)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	return []byte(fmt.Sprintf(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/opt/blob","contents":{"source":"data:;base64,%s"}}]}}`,
		base64.StdEncoding.EncodeToString(raw)))
}

func elToritoEntries(t *testing.T, iso string) string {
	t.Helper()
	out := run(t, t.TempDir(), "xorriso", "-indev", iso, "-report_el_torito", "plain")
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		// Compare platforms and image paths; LBAs move and xorriso recomputes load sizes.
		if strings.HasPrefix(l, "El Torito img path :") {
			lines = append(lines, l)
		}
		if f := strings.Fields(strings.TrimPrefix(l, "El Torito boot img :")); strings.HasPrefix(l, "El Torito boot img :") && len(f) > 2 {
			lines = append(lines, f[0]+" "+f[1]+" "+f[2])
		}
	}
	return strings.Join(lines, "\n")
}

func TestOversizedConfigRebuild(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	testbin.Require(t, "xz", "xz-utils")
	testbin.Require(t, "cpio", "cpio")
	ctx := context.Background()
	cfg := bigConfig(400 << 10)
	for _, tt := range []struct {
		name    string
		inPlace bool
	}{
		{"embed-areas-2023-07.x86_64.iso", false},
		{"embed-areas-2023-07.x86_64.iso", true},
		{"embed-areas-2021-09.iso", false},
		{"embed-areas-2021-01.iso", false}, // legacy coreKarg areas become a kargs.json
	} {
		t.Run(fmt.Sprintf("%s/inplace=%v", tt.name, tt.inPlace), func(t *testing.T) {
			in := coreisotest.Fixture(t, tt.name)
			// the config a rebuild replaces must not stay behind in the image
			if _, err := Customize(ctx, in, "", Customization{Ignition: testConfig("replaced")}); err != nil {
				t.Fatal(err)
			}
			oldArea := areaOf(t, in)
			wantBoot := elToritoEntries(t, in)
			def, defErr := ShowKargs(in, true)
			out, target := filepath.Join(t.TempDir(), "out.iso"), ""
			target = out
			if tt.inPlace {
				out, target = "", in
			}
			c := Customization{Ignition: cfg, KargsAppend: []string{"snofactory.big=1"}, Force: true}
			if defErr != nil {
				c.KargsAppend = nil
			}
			rep, err := Customize(ctx, in, out, c)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Strategy != StrategyRebuild || rep.PayloadBytes <= 262144 || rep.AreaBytes < int64(rep.PayloadBytes) || rep.OriginalAreaBytes != 262144 {
				t.Fatalf("report = %+v, want a rebuild with a grown area", rep)
			}
			t.Logf("config %d bytes, payload %d, area %d -> %d", rep.ConfigBytes, rep.PayloadBytes, rep.OriginalAreaBytes, rep.AreaBytes)
			got, err := ShowIgnition(target)
			if err != nil || !bytes.Equal(got, cfg) {
				t.Fatalf("show after rebuild: %d bytes, %v", len(got), err)
			}
			if oracle := extractConfigWithTools(t, target); !bytes.Equal(oracle, cfg) {
				t.Fatal("xorriso/xz/cpio extraction differs from the config")
			}
			iso, err := Open(target)
			if err != nil {
				t.Fatal(err)
			}
			if iso.Layout.Ignition.Source != SourceIgnInfo {
				t.Errorf("rebuilt ISO's area found via %s, want igninfo.json", iso.Layout.Ignition.Source)
			}
			assertZeroed(t, iso, oldArea)
			iso.Close()
			if gotBoot := elToritoEntries(t, target); gotBoot != wantBoot {
				t.Errorf("El Torito boot entries changed:\n%s\nwant:\n%s", gotBoot, wantBoot)
			}
			if defErr == nil {
				assertKargsInBootConfigs(t, target, def+" snofactory.big=1")
			}
			assertReembeds(t, target, wantBoot)
		})
	}
}

// areaOf returns where the embed area of the ISO at p lies.
func areaOf(t *testing.T, p string) EmbedArea {
	t.Helper()
	iso, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	return iso.Layout.Ignition
}

// assertZeroed checks that the bytes where an embed area was are zeros in iso.
func assertZeroed(t *testing.T, iso *ISO, old EmbedArea) {
	t.Helper()
	if old.Offset == iso.Layout.Ignition.Offset {
		t.Fatalf("the rebuilt area is still at %d", old.Offset)
	}
	b := make([]byte, old.Length)
	if _, err := iso.f.ReadAt(b, old.Offset); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(b, func(c byte) bool { return c != 0 }); i >= 0 {
		t.Errorf("the replaced embed area still holds data at byte %d of %d", i, len(b))
	}
}

// assertKargsInBootConfigs checks that the ISO reports want as its kernel
// arguments and that every boot config holding a karg area carries them.
func assertKargsInBootConfigs(t *testing.T, iso, want string) {
	t.Helper()
	k, err := ShowKargs(iso, false)
	if err != nil || k != want {
		t.Errorf("kargs after rebuild = %q, %v", k, err)
	}
	for _, f := range kargsFiles(t, iso) {
		dir := t.TempDir()
		run(t, dir, "xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/"+f, filepath.Join(dir, "cfg"))
		body, _ := os.ReadFile(filepath.Join(dir, "cfg"))
		if !bytes.Contains(body, []byte(want+"\n")) {
			t.Errorf("%s lacks the appended karg", f)
		}
	}
}

// assertReembeds checks that a rebuilt ISO takes a still larger config by
// rebuilding again (keeping its boot entries) and then a small one by patching.
func assertReembeds(t *testing.T, iso, wantBoot string) {
	t.Helper()
	ctx := context.Background()
	bigger := bigConfig(1 << 20)
	rep, err := Customize(ctx, iso, "", Customization{Ignition: bigger, Force: true})
	if err != nil || rep.Strategy != StrategyRebuild {
		t.Fatalf("second rebuild: %+v, %v", rep, err)
	}
	if got, _ := ShowIgnition(iso); !bytes.Equal(got, bigger) {
		t.Fatal("second rebuild does not read back")
	}
	if gotBoot := elToritoEntries(t, iso); gotBoot != wantBoot {
		t.Errorf("El Torito boot entries changed after the second rebuild:\n%s", gotBoot)
	}
	small := testConfig("after-rebuild")
	rep, err = Customize(ctx, iso, "", Customization{Ignition: small, Force: true})
	if err != nil || rep.Strategy != StrategyPatch {
		t.Fatalf("re-embed: %+v, %v", rep, err)
	}
	if got, _ := ShowIgnition(iso); !bytes.Equal(got, small) {
		t.Fatalf("re-embed shows %q", got)
	}
}

// A block device output is rebuilt in a file beside the input and written to the
// device in place. It uses a loop device where the machine allows one (root, losetup).
func TestRebuildToBlockDevice(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	in := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	st, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(t.TempDir(), "stick.img")
	if err := os.WriteFile(backing, bytes.Repeat([]byte{0xee}, int(st.Size())+8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dev, detach := testbin.LoopDevice(t, backing)
	cfg := bigConfig(400 << 10)
	rep, err := Customize(context.Background(), in, dev, Customization{Ignition: cfg})
	if err != nil || rep.Strategy != StrategyRebuild {
		t.Fatalf("rebuild to %s: %+v, %v", dev, rep, err)
	}
	if fi, err := os.Stat(dev); err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("the device node was replaced: %v", err)
	}
	detach()
	if got, err := ShowIgnition(backing); err != nil || !bytes.Equal(got, cfg) {
		t.Fatalf("the device shows %d bytes of config, %v", len(got), err)
	}
	if got, want := elToritoEntries(t, backing), elToritoEntries(t, in); got != want {
		t.Errorf("El Torito boot entries changed:\n%s\nwant:\n%s", got, want)
	}
}

func TestOversizedRefusals(t *testing.T) {
	ctx := context.Background()
	cfg := bigConfig(400 << 10)
	// s390x: the area is a slice of images/cdboot.img and cannot grow.
	in := coreisotest.Fixture(t, "embed-areas-2023-07.s390x.iso")
	_, err := Customize(ctx, in, filepath.Join(t.TempDir(), "o.iso"), Customization{Ignition: cfg})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "cdboot.img") {
		t.Fatalf("s390x oversized error = %v", err)
	}
	// NoRebuild: a clear error instead
	in = coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	_, err = Customize(ctx, in, "", Customization{Ignition: cfg, NoRebuild: true})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("NoRebuild error = %v", err)
	}
}

// TestOutputModeAndLog checks that a new output gets the asked mode whichever
// way it is written, and that a rebuild reports to the given log, never to
// the process-wide one (which writes to stderr under a progress display).
func TestOutputModeAndLog(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	ctx := context.Background()
	var global bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	for _, tt := range []struct {
		name string
		cfg  []byte
		mode os.FileMode
		want os.FileMode
		via  Strategy
	}{
		// An ISO carrying a config is private unless the caller asks otherwise.
		{"patch/default", testConfig("mode"), 0, 0o600, StrategyPatch},
		{"patch/shared", testConfig("mode"), 0o644, 0o644, StrategyPatch},
		{"rebuild/default", bigConfig(400 << 10), 0, 0o600, StrategyRebuild},
		{"rebuild/shared", bigConfig(400 << 10), 0o644, 0o644, StrategyRebuild},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
			out := filepath.Join(t.TempDir(), "out.iso")
			var stageLog bytes.Buffer
			c := Customization{Ignition: tt.cfg, Mode: tt.mode,
				Log: slog.New(slog.NewTextHandler(&stageLog, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			rep, err := Customize(ctx, in, out, c)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Strategy != tt.via {
				t.Fatalf("strategy %s, want %s", rep.Strategy, tt.via)
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tt.want {
				t.Errorf("output mode %v, want %v", st.Mode().Perm(), tt.want)
			}
			if tt.via == StrategyRebuild && !strings.Contains(stageLog.String(), "rebuilding the ISO") {
				t.Errorf("the rebuild was not reported to the given log:\n%s", stageLog.String())
			}
			if tt.via == StrategyRebuild && !strings.Contains(stageLog.String(), "tool=xorriso") {
				t.Errorf("xorriso's output did not reach the given log:\n%s", stageLog.String())
			}
		})
	}
	// a nil Log discards: nothing reaches the process-wide logger either way
	in := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	if _, err := Customize(ctx, in, filepath.Join(t.TempDir(), "o.iso"), Customization{Ignition: bigConfig(400 << 10)}); err != nil {
		t.Fatal(err)
	}
	if global.Len() > 0 {
		t.Errorf("the process-wide logger got:\n%s", global.String())
	}
}
