package conformance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"

	"github.com/snofactory/snofactory/seeds/artifact/sbom"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
)

// The conformance OS's package database lists, as installed, the Debian packages its
// files come from, at the host's versions: dpkg-query reads it as a database, the agent
// lists those packages from an installed root that carries it, and a seed's SBOM built
// from those facts names them all. (The reproducible bench checks a real demo seed's
// SBOM with MissingPackages.)
func TestDpkgStatusListsThePackages(t *testing.T) {
	ctx := context.Background()
	_, kver, err := findKernel("")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tr := newTree()
	if err := populate(ctx, tr, kver, self); err != nil {
		t.Fatal(err)
	}
	status, ok := tr.files[DpkgStatusPath]
	if !ok {
		t.Fatalf("the initramfs has no %s", DpkgStatusPath)
	}
	// The root as the installer leaves it: the status file and os-release.
	root := t.TempDir()
	for p, b := range map[string][]byte{"var/lib/dpkg/status": status.data, "etc/os-release": tr.files["/etc/os-release"].data} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// dpkg-query, the real reader of the format, sees every package installed.
	out, err := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W",
		"-f=${db:Status-Abbrev}|${Package}|${Version}|${Architecture}\n").Output()
	if err != nil {
		t.Fatalf("dpkg-query on the conformance OS's database: %v%s", err, stderrOf(err))
	}
	listed := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 || f[0] != "ii " || f[3] == "" {
			t.Errorf("dpkg-query lists %q, want an installed package with an architecture", line)
			continue
		}
		listed[f[1]] = f[2]
	}
	parsed, err := parseDpkgStatus(status.data)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed) != len(listed) {
		t.Errorf("parseDpkgStatus read %d packages, dpkg-query %d", len(parsed), len(listed))
	}
	for _, want := range []string{pkgBusybox, pkgIgnition, pkgExtlinux, pkgE2fsprogs, "libext2fs2", "libc6", pkgGrubEFI, "linux-image-" + kver} {
		host, err := exec.Command("dpkg-query", "-W", "-f=${Version}", want).Output()
		if err != nil {
			t.Fatalf("the host's %s: %v", want, err)
		}
		if listed[want] != string(host) {
			t.Errorf("the database lists %s at %q, the host has %q", want, listed[want], host)
		}
	}
	// Build tools and ISO-only boot files are not part of the installed OS.
	for _, not := range []string{pkgXorriso, pkgIsolinux, pkgSyslinux} {
		if _, ok := listed[not]; ok {
			t.Errorf("the database lists %s, which only builds or boots the ISO", not)
		}
	}

	facts, err := agent.GatherFacts(ctx, agent.FactsOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	pf := facts.Inventory.Packages
	if pf == nil || pf.Manager != wire.ManagerDpkg || pf.DistroID != "snofactory-conformance" || pf.DistroVersion != strings.TrimPrefix(builderVersion, "conformance-iso/") || pf.Reason != "" {
		t.Fatalf("the agent's package facts: %+v", pf)
	}
	for name, version := range listed {
		if !slices.ContainsFunc(pf.Packages, func(p wire.PackageFact) bool { return p.Name == name && p.Version == version && p.Arch != "" }) {
			t.Errorf("the agent does not list %s %s", name, version)
		}
	}
	if pf.Total != len(listed) {
		t.Errorf("the agent counts %d packages, the database has %d", pf.Total, len(listed))
	}

	// The SBOM of a seed whose node reported these facts names every package, as read back
	// by seeds/artifact/sbom; MissingPackages (which the bench asks of a real demo seed's SBOM) sees
	// one left out.
	sbomOf := func(pkgs []wire.PackageFact) *spdx.Document {
		t.Helper()
		osp := sbom.OSPackages{Manager: pf.Manager, DistroID: pf.DistroID, DistroVersion: pf.DistroVersion, Total: len(pkgs)}
		for _, p := range pkgs {
			osp.Packages = append(osp.Packages, sbom.Package{Name: p.Name, Version: p.Version, Arch: p.Arch})
		}
		m := &seed.Manifest{Name: "demo", Target: oskind.CoreOS, Created: time.Unix(1700000000, 0),
			Disks: []seed.Disk{{Format: seed.FormatChunked, RawDigest: digest.FromString("disk")}}}
		doc, err := sbom.Build(sbom.Input{Manifest: m, OS: osp})
		if err != nil {
			t.Fatal(err)
		}
		b, err := sbom.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := sbom.Read(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return back
	}
	if missing, err := MissingPackages(ctx, sbomOf(pf.Packages)); err != nil || len(missing) > 0 {
		t.Errorf("the SBOM does not name %q (%v)", missing, err)
	}
	i := slices.IndexFunc(pf.Packages, func(p wire.PackageFact) bool { return p.Name == pkgBusybox })
	without := slices.Delete(slices.Clone(pf.Packages), i, i+1)
	if missing, err := MissingPackages(ctx, sbomOf(without)); err != nil || len(missing) != 1 || !strings.HasPrefix(missing[0], pkgBusybox+" ") {
		t.Errorf("an SBOM without %s: missing %q (%v)", pkgBusybox, missing, err)
	}
}

func TestDebOwners(t *testing.T) {
	ctx := context.Background()
	q, err := exec.LookPath("dpkg-query")
	if err != nil {
		t.Fatal(err)
	}
	// /usr/sbin/mke2fs is the merged-/usr spelling of the /sbin/mke2fs e2fsprogs ships.
	got, err := debOwners(ctx, q, []string{"/usr/sbin/mke2fs", busyboxBin.src, busyboxBin.src})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{pkgBusybox, pkgE2fsprogs}) {
		t.Errorf("owners %q", got)
	}
	if _, err := debOwners(ctx, q, []string{busyboxBin.src, "/nonexistent/snofactory"}); err == nil ||
		!strings.Contains(err.Error(), "no Debian package owns /nonexistent/snofactory") {
		t.Errorf("a file no package owns: %v", err)
	}
}

func TestParseDpkgStatus(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         []DebPackage
		bad          bool
	}{
		{name: "installed and removed", status: "Package: a\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0-1\nDescription: A\n continued\n\n" +
			"Package: b\nStatus: deinstall ok config-files\nVersion: 2\n\n",
			want: []DebPackage{{"a", "1.0-1", "amd64"}}},
		{name: "no version", status: "Package: a\nStatus: install ok installed\n", bad: true},
		{name: "empty", status: "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDpkgStatus([]byte(tc.status))
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want one: %v", err, tc.bad)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
