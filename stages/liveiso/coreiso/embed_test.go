package coreiso

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
	"github.com/snofactory/snofactory/test/testbin"
)

// Offsets as coreos-installer's own tests and the fixtures' INDEX describe them.
func TestFixtureLayouts(t *testing.T) {
	tests := []struct {
		name        string
		ignOffset   int64
		ignSource   string
		kargsSource string // "" = no karg areas
		kargsSize   int
		kargsOffs   []int64
	}{
		{"embed-areas-2020-09.iso", 92160, SourceIgnitionImg, "", 0, nil},
		{"embed-areas-2021-01.iso", 96256, SourceIgnitionImg, SourceKargsLegacy, 1131, []int64{94026, 365415}},
		{"embed-areas-2021-09.iso", 102400, SourceIgnitionImg, SourceKargsJSON, 1139, []int64{371658, 98126}},
		{"embed-areas-2021-12.iso", 161792, SourceIgnitionImg, SourceKargsJSON, 1139, []int64{431050, 139086}},
		{"embed-areas-2022-02.iso", 159744, SourceIgnitionImg, SourceKargsJSON, 1139, []int64{429002, 137038}},
		{"embed-areas-2022-09.iso", 159744, SourceIgnitionImg, SourceKargsJSON, 1139, []int64{429002, 137038}},
		{"embed-areas-2023-03.s390x.iso", 203776, SourceIgnInfo, "", 0, nil},
		{"embed-areas-2023-03.x86_64.iso", 157696, SourceIgnInfo, SourceKargsJSON, 1139, []int64{431050, 427853}},
		{"embed-areas-2023-07.s390x.iso", 203776, SourceIgnInfo, SourceKargsJSON, 896, []int64{138368}},
		{"embed-areas-2023-07.x86_64.iso", 139264, SourceIgnInfo, SourceKargsJSON, 1139, []int64{408522, 137037}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iso, err := Open(coreisotest.Fixture(t, tt.name))
			if err != nil {
				t.Fatal(err)
			}
			defer iso.Close()
			l := iso.Layout
			if l.Ignition.Offset != tt.ignOffset || l.Ignition.Length != 262144 || l.Ignition.Source != tt.ignSource {
				t.Errorf("embed area = %+v, want offset %d length 262144 from %s", l.Ignition, tt.ignOffset, tt.ignSource)
			}
			if tt.kargsSource == "" {
				if l.Kargs != nil {
					t.Fatalf("unexpected karg areas %+v", l.Kargs)
				}
				if _, err := iso.Kargs(); !errors.Is(err, ErrNoKargsArea) {
					t.Errorf("Kargs() error = %v, want ErrNoKargsArea", err)
				}
				return
			}
			if l.Kargs == nil {
				t.Fatal("no karg areas found")
			}
			if l.Kargs.Source != tt.kargsSource || l.Kargs.Size != tt.kargsSize || len(l.Kargs.Areas) != len(tt.kargsOffs) {
				t.Fatalf("kargs = %+v, want %s size %d at %v", l.Kargs, tt.kargsSource, tt.kargsSize, tt.kargsOffs)
			}
			for i, a := range l.Kargs.Areas {
				if a.Offset != tt.kargsOffs[i] {
					t.Errorf("karg area %d at %d, want %d", i, a.Offset, tt.kargsOffs[i])
				}
			}
			cur, err := iso.Kargs()
			if err != nil {
				t.Fatal(err)
			}
			if cur != l.Kargs.Default || !strings.Contains(cur, "ignition.firstboot") {
				t.Errorf("pristine kargs %q differ from default %q", cur, l.Kargs.Default)
			}
		})
	}
}

// The legacy coreiso+ header names the same area as images/ignition.img; it
// is used when the file cannot be found.
func TestLegacyIgnitionHeader(t *testing.T) {
	p := coreisotest.Fixture(t, "embed-areas-2021-01.iso")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data[legacyIgnHeaderOffset:], []byte("coreiso+")) {
		t.Fatal("fixture lacks the coreiso+ header")
	}
	hideIgnitionImg(t, data)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	iso, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	if a := iso.Layout.Ignition; a.Source != SourceLegacy || a.Offset != 96256 || a.Length != 262144 {
		t.Fatalf("embed area = %+v, want the coreiso+ header's 96256+262144", a)
	}
	out := filepath.Join(t.TempDir(), "out.iso")
	cfg := testConfig("legacy")
	if _, err := Customize(context.Background(), p, out, Customization{Ignition: cfg}); err != nil {
		t.Fatal(err)
	}
	got, err := ShowIgnition(out)
	if err != nil || !bytes.Equal(got, cfg) {
		t.Fatalf("show after embed = %q, %v", got, err)
	}
}

func testConfig(tag string) []byte {
	return []byte(fmt.Sprintf(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/tag","contents":{"source":"data:,%s"}}]}}`, tag))
}

// For every x86_64 fixture, in both write modes: embed, show, cross-check
// with xorriso + xz + cpio, refuse a second embed without force, remove.
func TestEmbedShowRemove(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	testbin.Require(t, "xz", "xz-utils")
	testbin.Require(t, "cpio", "cpio")
	ctx := context.Background()
	for _, name := range coreisotest.Names(t, isX86) {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/inplace=%v", name, inPlace), func(t *testing.T) {
				in := coreisotest.Fixture(t, name)
				orig, err := os.ReadFile(in)
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), "out.iso")
				target := out
				if inPlace {
					out, target = "", in
				}
				cfg := testConfig(name)
				rep, err := Customize(ctx, in, out, Customization{Ignition: cfg})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Strategy != StrategyPatch || rep.ConfigBytes != len(cfg) || rep.PayloadBytes == 0 || rep.PatchedBytes != 262144 {
					t.Errorf("report = %+v", rep)
				}
				got, err := ShowIgnition(target)
				if err != nil || !bytes.Equal(got, cfg) {
					t.Fatalf("show = %q, %v; want %q", got, err, cfg)
				}
				if oracle := extractConfigWithTools(t, target); !bytes.Equal(oracle, cfg) {
					t.Fatalf("xorriso/xz/cpio found %q, want %q", oracle, cfg)
				}
				// only the embed area changed
				now, err := os.ReadFile(target)
				if err != nil {
					t.Fatal(err)
				}
				iso, err := Open(target)
				if err != nil {
					t.Fatal(err)
				}
				a := iso.Layout.Ignition
				iso.Close()
				if len(now) != len(orig) || !bytes.Equal(now[:a.Offset], orig[:a.Offset]) || !bytes.Equal(now[a.Offset+a.Length:], orig[a.Offset+a.Length:]) {
					t.Fatal("bytes outside the embed area changed")
				}

				// a second embed is refused without force, accepted with it
				_, err = Customize(ctx, target, "", Customization{Ignition: testConfig("second")})
				if !errors.Is(err, ErrAlreadyEmbedded) {
					t.Fatalf("second embed error = %v, want ErrAlreadyEmbedded", err)
				}
				if _, err := Customize(ctx, target, "", Customization{Ignition: testConfig("second"), Force: true}); err != nil {
					t.Fatal(err)
				}
				if got, _ := ShowIgnition(target); !bytes.Equal(got, testConfig("second")) {
					t.Fatalf("forced embed shows %q", got)
				}

				// remove restores the pristine (zeroed) area
				if _, err := Customize(ctx, target, "", Customization{RemoveIgnition: true}); err != nil {
					t.Fatal(err)
				}
				now, err = os.ReadFile(target)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(now, orig) {
					t.Fatal("after remove the ISO differs from the pristine fixture")
				}
				if _, err := ShowIgnition(target); !errors.Is(err, ErrNoConfig) {
					t.Fatalf("show after remove: %v, want ErrNoConfig", err)
				}
			})
		}
	}
}

// extractConfigWithTools reads config.ign the way an outsider would: xorriso
// extracts the area file, xz decompresses, cpio unpacks.
func extractConfigWithTools(t *testing.T, isoPath string) []byte {
	t.Helper()
	iso, err := Open(isoPath)
	if err != nil {
		t.Fatal(err)
	}
	a := iso.Layout.Ignition
	fileOff := int64(0)
	if a.File != "" {
		fs, err := openISOFS(isoPath, iso.f, iso.size)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fs.lookup(a.File)
		if err != nil {
			t.Fatal(err)
		}
		fileOff = a.Offset - f.Offset
	}
	iso.Close()
	if a.File == "" {
		t.Fatalf("area %+v is not inside a file; use a layout with one", a)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "area.img")
	run(t, dir, "xorriso", "-osirrox", "on", "-indev", isoPath, "-extract", "/"+a.File, img)
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	raw = raw[fileOff : fileOff+a.Length]
	comp := filepath.Join(dir, "initrd.cpio.xz")
	if err := os.WriteFile(comp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "xz", "-d", comp)
	img = filepath.Join(dir, "initrd.cpio")
	unpack := filepath.Join(dir, "root")
	if err := os.Mkdir(unpack, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("cpio -idm --no-absolute-filenames --quiet < %s", img)
	run(t, unpack, "sh", "-c", cmd)
	st, err := os.Stat(filepath.Join(unpack, "config.ign"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config.ign mode %v, want 0600", st.Mode().Perm())
	}
	out, err := os.ReadFile(filepath.Join(unpack, "config.ign"))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
