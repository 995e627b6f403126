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

// The s390x layouts keep the embed area (and, from 2023-07, a karg area with
// NUL padding) inside images/cdboot.img.
func TestS390x(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	testbin.Require(t, "xz", "xz-utils")
	testbin.Require(t, "cpio", "cpio")
	ctx := context.Background()
	for _, name := range coreisotest.Names(t, isS390x) {
		t.Run(name, func(t *testing.T) {
			in := coreisotest.Fixture(t, name)
			orig, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out.iso")
			cfg := testConfig(name)
			if _, err := Customize(ctx, in, out, Customization{Ignition: cfg}); err != nil {
				t.Fatal(err)
			}
			if got, err := ShowIgnition(out); err != nil || !bytes.Equal(got, cfg) {
				t.Fatalf("show = %q, %v", got, err)
			}
			if oracle := extractConfigWithTools(t, out); !bytes.Equal(oracle, cfg) {
				t.Fatalf("xorriso/xz/cpio found %q", oracle)
			}

			kargs := Customization{KargsAppend: []string{"rd.znet=qeth,0.0.bdf0"}}
			_, err = Customize(ctx, out, "", kargs)
			if strings.Contains(name, "2023-03") {
				// this layout has no kargs.json and no coreKarg header
				if !errors.Is(err, ErrNoKargsArea) || !strings.Contains(err.Error(), out) {
					t.Fatalf("kargs on %s: error = %v, want ErrNoKargsArea naming the file", name, err)
				}
				if _, err := ShowKargs(out, false); !errors.Is(err, ErrNoKargsArea) {
					t.Fatalf("show kargs: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			def, _ := ShowKargs(out, true)
			if got, err := ShowKargs(out, false); err != nil || got != def+" rd.znet=qeth,0.0.bdf0" {
				t.Fatalf("kargs = %q, %v", got, err)
			}
			dir := t.TempDir()
			run(t, dir, "xorriso", "-osirrox", "on", "-indev", out, "-extract", "/images/cdboot.img", filepath.Join(dir, "cdboot.img"))
			body, err := os.ReadFile(filepath.Join(dir, "cdboot.img"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(body, []byte(def+" rd.znet=qeth,0.0.bdf0\x00")) {
				t.Error("cdboot.img lacks the NUL-terminated new kargs")
			}
			if _, err := Customize(ctx, out, "", Customization{ResetKargs: true, RemoveIgnition: true}); err != nil {
				t.Fatal(err)
			}
			now, _ := os.ReadFile(out)
			if !bytes.Equal(now, orig) {
				t.Fatal("reset + remove did not restore the pristine image")
			}
		})
	}
}

func TestNetworkKeyfiles(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	testbin.Require(t, "xz", "xz-utils")
	testbin.Require(t, "cpio", "cpio")
	ctx := context.Background()
	keyfile := []byte("[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=manual\naddress1=192.0.2.10/24,192.0.2.1\n")
	in := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	cfg := testConfig("net")
	rep, err := Customize(ctx, in, "", Customization{Ignition: cfg, NetworkKeyfiles: map[string][]byte{"eth0.nmconnection": keyfile}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NetworkFiles != 1 {
		t.Errorf("report counts %d network files", rep.NetworkFiles)
	}
	got, err := ShowNetwork(in)
	if err != nil || len(got) != 1 || !bytes.Equal(got["eth0.nmconnection"], keyfile) {
		t.Fatalf("ShowNetwork = %v, %v", got, err)
	}
	// the config is still there, and an outsider's cpio sees the tree
	if c, _ := ShowIgnition(in); !bytes.Equal(c, cfg) {
		t.Fatal("config lost")
	}
	extractConfigWithTools(t, in)
	dir := t.TempDir()
	iso, err := Open(in)
	if err != nil {
		t.Fatal(err)
	}
	a := iso.Layout.Ignition
	iso.Close()
	raw, _ := os.ReadFile(in)
	if err := os.WriteFile(filepath.Join(dir, "i.xz"), raw[a.Offset:a.Offset+a.Length], 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "xz", "-d", "i.xz")
	listing := string(run(t, dir, "sh", "-c", "cpio -itv < i"))
	for _, want := range []string{"drwxr-xr-x", "etc/coreos-firstboot-network\n", "-rw-------", "etc/coreos-firstboot-network/eth0.nmconnection"} {
		if !strings.Contains(listing, want) {
			t.Errorf("cpio listing lacks %q:\n%s", want, listing)
		}
	}
	// replacing keyfiles drops the old set; removing the config keeps them
	if _, err := Customize(ctx, in, "", Customization{NetworkKeyfiles: map[string][]byte{"br-ex.nmconnection": keyfile}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Customize(ctx, in, "", Customization{RemoveIgnition: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = ShowNetwork(in)
	if len(got) != 1 || got["br-ex.nmconnection"] == nil {
		t.Fatalf("network files = %v", got)
	}
	// bad names are refused
	if _, err := Customize(ctx, in, "", Customization{NetworkKeyfiles: map[string][]byte{"../x": keyfile}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("bad keyfile name: %v", err)
	}
	// an ISO whose initramfs does not read them says so
	old := coreisotest.Fixture(t, "embed-areas-2021-09.iso")
	_, err = Customize(ctx, old, "", Customization{NetworkKeyfiles: map[string][]byte{"eth0.nmconnection": keyfile}})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "live-initrd-network") {
		t.Fatalf("old ISO: %v", err)
	}
}
