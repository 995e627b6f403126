package coreiso

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
	"github.com/snofactory/snofactory/test/testbin"
)

func TestKargsEdit(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		edit    KargsEdit
		want    string
		wantErr error
	}{
		{"append", "a b=1", KargsEdit{Append: []string{"c", "d=2"}}, "a b=1 c d=2", nil},
		{"delete all copies", "a b=1 a", KargsEdit{Delete: []string{"a"}}, "b=1", nil},
		// coreos-installer refuses it too: a typo must not pass as done
		{"delete missing", "a", KargsEdit{Delete: []string{"zz"}}, "", ErrInvalidInput},
		{"delete twice", "a b", KargsEdit{Delete: []string{"a", "a"}}, "", ErrInvalidInput},
		{"replace value", "console=tty0 b", KargsEdit{Replace: []string{"console=tty0=ttyS0,115200"}}, "console=ttyS0,115200 b", nil},
		{"replace flag", "quiet b", KargsEdit{Replace: []string{"quiet=debug"}}, "debug b", nil},
		{"replace missing", "a", KargsEdit{Replace: []string{"x=1=2"}}, "", ErrInvalidInput},
		{"replace malformed", "a", KargsEdit{Replace: []string{"a"}}, "", ErrInvalidInput},
		{"quoted", `x="a b" y`, KargsEdit{Delete: []string{"y"}, Append: []string{`z="c d"`}}, `x="a b" z="c d"`, nil},
		{"two args in one", "a", KargsEdit{Append: []string{"b c"}}, "", ErrInvalidInput},
		{"empty arg", "a", KargsEdit{Append: []string{""}}, "", ErrInvalidInput},
		{"order: delete, replace, append", "a=1", KargsEdit{Append: []string{"a=1"}, Delete: []string{"a=1"}}, "a=1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.edit.Apply(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Apply(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// For every x86_64 fixture with karg areas: modify, show, check the boot
// config files as xorriso extracts them, reset back to the pristine bytes.
func TestKargsModifyShowReset(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	ctx := context.Background()
	for _, name := range coreisotest.Names(t, isX86) {
		t.Run(name, func(t *testing.T) {
			in := coreisotest.Fixture(t, name)
			orig, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			edit := Customization{
				KargsAppend:  []string{"console=ttyS0,115200n8", "snofactory.test=1"},
				KargsDelete:  []string{"ignition.platform.id=metal"},
				KargsReplace: []string{"ignition.firstboot=snofactory.firstboot"},
			}
			out := filepath.Join(t.TempDir(), "out.iso")
			_, err = Customize(ctx, in, out, edit)
			if name == "embed-areas-2020-09.iso" {
				if !errors.Is(err, ErrNoKargsArea) || !strings.Contains(err.Error(), in) {
					t.Fatalf("error = %v, want ErrNoKargsArea naming the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			def, err := ShowKargs(in, true)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Replace(strings.Replace(def, " ignition.platform.id=metal", "", 1), "ignition.firstboot", "snofactory.firstboot", 1) +
				" console=ttyS0,115200n8 snofactory.test=1"
			got, err := ShowKargs(out, false)
			if err != nil || got != want {
				t.Fatalf("kargs = %q, %v; want %q", got, err, want)
			}
			if d, _ := ShowKargs(out, true); d != def {
				t.Errorf("default kargs changed to %q", d)
			}
			for _, f := range kargsFiles(t, out) {
				dir := t.TempDir()
				dst := filepath.Join(dir, "cfg")
				run(t, dir, "xorriso", "-osirrox", "on", "-indev", out, "-extract", "/"+f, dst)
				body, err := os.ReadFile(dst)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(body, []byte(want+"\n")) {
					t.Errorf("%s as extracted by xorriso lacks %q:\n%s", f, want, body)
				}
			}
			// reset, in place, restores the pristine image byte for byte
			if _, err := Customize(ctx, out, "", Customization{ResetKargs: true}); err != nil {
				t.Fatal(err)
			}
			now, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(now, orig) {
				t.Fatal("after reset the ISO differs from the pristine fixture")
			}
			// too long for the area: a clear error, nothing written
			long := strings.Repeat("x", 2048)
			if _, err := Customize(ctx, out, "", Customization{KargsAppend: []string{long}}); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("oversized kargs error = %v", err)
			}
		})
	}
}

// kargsFiles lists the ISO paths of the files holding karg areas.
func kargsFiles(t *testing.T, p string) []string {
	t.Helper()
	iso, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	fs, err := openISOFS(p, iso.f, iso.size)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.walk()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range iso.Layout.Kargs.Areas {
		for _, f := range files {
			if a.Offset >= f.Offset && a.Offset < f.Offset+f.Length {
				out = append(out, f.Path)
			}
		}
	}
	if len(out) != len(iso.Layout.Kargs.Areas) {
		t.Fatalf("found files %v for %d areas", out, len(iso.Layout.Kargs.Areas))
	}
	return out
}

// All areas must agree; a disagreeing image is reported, not half-edited.
func TestKargsAreasDisagree(t *testing.T) {
	p := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	iso, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	off := iso.Layout.Kargs.Areas[1].Offset
	iso.Close()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ShowKargs(p, false)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("error = %v, want areas-disagree", err)
	}
	if _, err := Customize(context.Background(), p, "", Customization{KargsAppend: []string{"a"}}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("modify error = %v", err)
	}
}
