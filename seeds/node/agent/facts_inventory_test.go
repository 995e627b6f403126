package agent

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/test/testbin"
)

// dpkgStatus is a dpkg status file: an installed package with an epoch and a revision, a
// removed one whose configuration files remain, and a half-installed one.
const dpkgStatus = `Package: busybox-static
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 1:1.35.0-4+b3
Description: Standalone rescue shell
 with tons of builtin utilities

Package: ignition
Status: install ok installed
Architecture: amd64
Version: 2.14.0-1+b5

Package: removed-tool
Status: deinstall ok config-files
Architecture: amd64
Version: 0.9

Package: broken
Status: install reinstreq half-installed
Architecture: all
Version: 3
`

var wantDpkg = []wire.PackageFact{
	{Name: "busybox-static", Version: "1:1.35.0-4+b3", Arch: "amd64"},
	{Name: "ignition", Version: "2.14.0-1+b5", Arch: "amd64"},
}

// TestGatherPackagesDpkg reads a root's dpkg database with the real dpkg-query, and
// without it (the conformance OS has none) from the status file itself: both give the
// installed packages only.
func TestGatherPackagesDpkg(t *testing.T) {
	tests := []struct {
		name       string
		dpkgQuery  bool
		distroID   string
		distroVers string
	}{
		{name: "dpkg-query", dpkgQuery: true, distroID: "debian", distroVers: "12"},
		{name: "status file", dpkgQuery: false, distroID: "debian", distroVers: "12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tr := tree{t, root}
			tr.file("/var/lib/dpkg/status", dpkgStatus, 0o644)
			tr.file("/usr/lib/os-release", "NAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"12\"\n", 0o644)
			tr.link("/etc/os-release", "../usr/lib/os-release")
			if tt.dpkgQuery {
				testbin.Require(t, "dpkg-query", "dpkg")
			} else {
				t.Setenv("PATH", t.TempDir())
			}
			pf := gatherPackages(context.Background(), root)
			want := &wire.PackageFacts{Manager: wire.ManagerDpkg, DistroID: tt.distroID, DistroVersion: tt.distroVers,
				Packages: wantDpkg, Total: len(wantDpkg)}
			if !reflect.DeepEqual(pf, want) {
				t.Errorf("packages:\n got %+v\nwant %+v", pf, want)
			}
		})
	}
}

// TestGatherPackagesRPM installs two packages into an rpm database under a root with the
// real rpm and rpmbuild (Debian package rpm), and lists them as RHCOS's would be.
func TestGatherPackagesRPM(t *testing.T) {
	for _, tool := range []string{"rpm", "rpmbuild"} {
		testbin.Require(t, tool, "rpm")
	}
	work := t.TempDir()
	root := filepath.Join(work, "root")
	ctx := context.Background()
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "HOME="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	for _, spec := range []struct{ name, epoch string }{{"kernel-core", "Epoch: 1\n"}, {"bash", ""}} {
		p := filepath.Join(work, spec.name+".spec")
		body := fmt.Sprintf("Name: %s\n%sVersion: 5.1.8\nRelease: 9.el9\nSummary: t\nLicense: MIT\nBuildArch: noarch\n%%description\nt\n%%files\n", spec.name, spec.epoch)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		run("rpmbuild", "--define", "_topdir "+filepath.Join(work, "build"), "--define", "_rpmdir "+filepath.Join(work, "rpms"), "-bb", p)
	}
	rpms, _ := filepath.Glob(filepath.Join(work, "rpms", "noarch", "*.rpm"))
	run("rpm", "--root", root, "--dbpath", "/usr/lib/sysimage/rpm", "--initdb")
	run("rpm", append([]string{"--root", root, "--dbpath", "/usr/lib/sysimage/rpm", "--nodeps", "--justdb", "-i"}, rpms...)...)
	tree{t, root}.file("/etc/os-release", "ID=\"rhcos\"\nVERSION_ID=\"4.16\"\n", 0o644)

	pf := gatherPackages(ctx, root)
	want := &wire.PackageFacts{Manager: wire.ManagerRPM, DistroID: "rhcos", DistroVersion: "4.16", Total: 2, Packages: []wire.PackageFact{
		{Name: "bash", Version: "5.1.8", Release: "9.el9", Arch: "noarch"},
		{Name: "kernel-core", Epoch: "1", Version: "5.1.8", Release: "9.el9", Arch: "noarch"},
	}}
	if !reflect.DeepEqual(pf, want) {
		t.Errorf("packages:\n got %+v\nwant %+v", pf, want)
	}
}

// TestGatherFactsInventory: the facts carry the root's packages and the agents.
func TestGatherFactsInventory(t *testing.T) {
	o, _ := fakeInstalled(t, "snofactory.root=LABEL=sfroot")
	tree{t, o.Root}.file("/var/lib/dpkg/status", dpkgStatus, 0o644)
	f, err := GatherFacts(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if f.Packages == nil || f.Packages.Manager != wire.ManagerDpkg || !reflect.DeepEqual(f.Packages.Packages, wantDpkg) {
		t.Errorf("packages: %+v", f.Packages)
	}
	if len(f.Binaries) != 1 || f.Binaries[0].Installed || f.Binaries[0].SHA256 == "" {
		t.Errorf("binaries: %+v, want the running agent only", f.Binaries)
	}
}

func TestGatherPackagesNone(t *testing.T) {
	tests := []struct {
		name   string
		layout func(tree)
		reason string
	}{
		{"no database", func(tree) {}, "no rpm database"},
		// A status file that is a directory is no database.
		{"status not a file", func(tr tree) { tr.file("/var/lib/dpkg/status/x", "", 0o644) }, "no dpkg status file"},
		{"rpm database rpm cannot read", func(tr tree) { tr.file("/var/lib/rpm/rpmdb.sqlite", "not sqlite", 0o644) }, "rpm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.layout(tree{t, root})
			pf := gatherPackages(context.Background(), root)
			if len(pf.Packages) != 0 || pf.Total != 0 || !strings.Contains(pf.Reason, tt.reason) {
				t.Errorf("got %+v, want no packages and a reason with %q", pf, tt.reason)
			}
		})
	}
}

// TestGatherPackagesCapped lists a database larger than the report may carry: the list
// stops at wire.MaxPackages and says how many there are.
func TestGatherPackagesCapped(t *testing.T) {
	root := t.TempDir()
	var b strings.Builder
	n := wire.MaxPackages + 10
	for i := range n {
		fmt.Fprintf(&b, "Package: p%05d\nStatus: install ok installed\nVersion: 1\nArchitecture: all\n\n", i)
	}
	tree{t, root}.file("/var/lib/dpkg/status", b.String(), 0o644)
	t.Setenv("PATH", t.TempDir())
	pf := gatherPackages(context.Background(), root)
	if len(pf.Packages) != wire.MaxPackages || pf.Total != n || !strings.Contains(pf.Reason, fmt.Sprint(n)) {
		t.Errorf("got %d packages, total %d, reason %q; want %d, %d", len(pf.Packages), pf.Total, pf.Reason, wire.MaxPackages, n)
	}
}

func TestParseRPMLine(t *testing.T) {
	long := strings.Repeat("x", wire.MaxPackageField+40)
	tests := []struct {
		line string
		want wire.PackageFact
		ok   bool
		err  bool
	}{
		{line: "bash\t(none)\t5.1.8\t9.el9\tx86_64", want: wire.PackageFact{Name: "bash", Version: "5.1.8", Release: "9.el9", Arch: "x86_64"}, ok: true},
		{line: "kernel-core\t1\t5.14.0\t427.el9\tx86_64", want: wire.PackageFact{Name: "kernel-core", Epoch: "1", Version: "5.14.0", Release: "427.el9", Arch: "x86_64"}, ok: true},
		{line: "gpg-pubkey\t(none)\tfd431d51\t4ae0493b\t(none)", want: wire.PackageFact{Name: "gpg-pubkey", Version: "fd431d51", Release: "4ae0493b"}, ok: false},
		{line: long + "\t0\t1\t1\tnoarch", want: wire.PackageFact{Name: long[:wire.MaxPackageField], Epoch: "0", Version: "1", Release: "1", Arch: "noarch"}, ok: true},
		{line: "bad\xffname\t(none)\t1\t1\tx86_64", want: wire.PackageFact{Name: "bad?name", Version: "1", Release: "1", Arch: "x86_64"}, ok: true},
		{line: "too\tfew", err: true},
		{line: "\t(none)\t1\t1\tx86_64", err: true},
	}
	for _, tt := range tests {
		got, ok, err := parseRPMLine(tt.line)
		if (err != nil) != tt.err || ok != tt.ok || (!tt.err && got != tt.want) {
			t.Errorf("parseRPMLine(%q) = %+v, %v, %v; want %+v, %v, error %v", tt.line, got, ok, err, tt.want, tt.ok, tt.err)
		}
	}
}

func TestParseDpkgLine(t *testing.T) {
	tests := []struct {
		line string
		want wire.PackageFact
		ok   bool
		err  bool
	}{
		{line: "ii \tlibc6\t2.36-9+deb12u4\tamd64", want: wire.PackageFact{Name: "libc6", Version: "2.36-9+deb12u4", Arch: "amd64"}, ok: true},
		{line: "hi \tpinned\t1:2.0\tall", want: wire.PackageFact{Name: "pinned", Version: "1:2.0", Arch: "all"}, ok: true},
		{line: "rc \tgone\t1.0\tamd64"},
		{line: "iU \tunpacked\t1.0\tamd64"},
		{line: "ii \tlibc6\t2.36", err: true},
		{line: "ii \t\t1\tamd64", err: true},
	}
	for _, tt := range tests {
		got, ok, err := parseDpkgLine(tt.line)
		if (err != nil) != tt.err || ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("parseDpkgLine(%q) = %+v, %v, %v; want %+v, %v, error %v", tt.line, got, ok, err, tt.want, tt.ok, tt.err)
		}
	}
}

// TestRunQueryBounds stops a query that prints garbage or fails, and names why.
func TestRunQueryBounds(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"fails", "echo 'database locked' >&2; exit 3", "database locked"},
		{"line too long", "printf '%0200000d' 0", "token too long"},
		{"not the format", "echo hello", "not name, epoch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runQuery(context.Background(), "sh", []string{"-c", tt.script}, func(line string) error {
				_, _, err := parseRPMLine(line)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

// TestGatherBinaries describes the agent the installed root carries and the running one:
// sha256, size and the version `snofactory version` prints, read from the Go build
// information without running either.
func TestGatherBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	sum, _, err := hashFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions.Of(bi); got != versions.Self() {
		t.Errorf("versions.Of = %q, versions.Self = %q: the SBOM would name the agent differently", got, versions.Self())
	}
	tests := []struct {
		name   string
		layout func(tree)
		want   []wire.BinaryFact
	}{
		{"installed copy", func(tr tree) { tr.file(AgentPath, string(body), 0o755) }, []wire.BinaryFact{
			{Path: AgentPath, Installed: true, SHA256: sum, Size: int64(len(body)), Module: bi.Main.Path, Version: versions.Of(bi)},
		}},
		{"installed through a link inside the root", func(tr tree) {
			tr.file("/opt/bin/agent", string(body), 0o755)
			tr.link(AgentPath, "/opt/bin/agent")
		}, []wire.BinaryFact{
			{Path: AgentPath, Installed: true, SHA256: sum, Size: int64(len(body)), Module: bi.Main.Path, Version: versions.Of(bi)},
		}},
		{"not a Go binary", func(tr tree) { tr.file(AgentPath, "#!/bin/sh\n", 0o755) }, []wire.BinaryFact{
			{Path: AgentPath, Installed: true, SHA256: sha("#!/bin/sh\n"), Size: 10, Error: "no Go build information: "},
		}},
		{"none installed (OpenShift before its seal)", func(tree) {}, []wire.BinaryFact{
			{Path: self, SHA256: sum, Size: int64(len(body)), Module: bi.Main.Path, Version: versions.Of(bi)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.layout(tree{t, root})
			got := gatherBinaries(root)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				// The reader's own words vary with the Go release; the start is ours.
				if tt.want[i].Error != "" && strings.HasPrefix(got[i].Error, tt.want[i].Error) {
					got[i].Error = tt.want[i].Error
				}
				if got[i] != tt.want[i] {
					t.Errorf("binary %d:\n got %+v\nwant %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestFactsMessagePackages sends an RHCOS-sized package list in one message, and a list
// too long for one cut with its total kept, so the SBOM can say it is incomplete.
func TestFactsMessagePackages(t *testing.T) {
	tests := []struct {
		name string
		n    int
		cut  bool
	}{
		{"rhcos", 600, false},
		{"huge", wire.MaxPackages, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &wire.Facts{Version: wire.FactsVersion, Time: time.Unix(1700000000, 0).UTC()}
			pf := &wire.PackageFacts{Manager: wire.ManagerRPM, Total: tt.n}
			for i := range tt.n {
				pf.Packages = append(pf.Packages, wire.PackageFact{Name: fmt.Sprintf("package-with-a-long-name-%05d", i),
					Epoch: "1", Version: "1.2.3", Release: "4.el9_4.rhaos4.16", Arch: "x86_64"})
			}
			f.Packages = pf
			d, err := wire.FactsDetails(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := wire.DecodeFacts(wire.Message{Phase: wire.PhaseFacts, Details: d})
			if err != nil {
				t.Fatal(err)
			}
			if got.Packages == nil || got.Packages.Total != tt.n || got.Packages.Manager != wire.ManagerRPM {
				t.Fatalf("packages after the message: %+v", got.Packages)
			}
			if cut := len(got.Packages.Packages) < tt.n; cut != tt.cut || (tt.cut && (got.Truncated["packages"] != tt.n || !strings.Contains(got.Packages.Reason, "did not fit"))) {
				t.Errorf("%d of %d packages arrived (truncated %v, reason %q), want cut=%v", len(got.Packages.Packages), tt.n, got.Truncated, got.Packages.Reason, tt.cut)
			}
		})
	}
}
