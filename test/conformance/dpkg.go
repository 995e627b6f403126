package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// DpkgStatusPath is where the initramfs carries the conformance OS's package database,
// which the installer copies to the installed root's /var/lib/dpkg/status: so the node's
// agent lists the Debian packages the OS is made of, and the seed's SBOM names them.
const DpkgStatusPath = "/usr/share/conformance/dpkg-status"

// dpkgFields are what the status file says of each package, as dpkg-query prints them:
// the identity fields and the few descriptive ones readers show. Dependencies and
// conffiles are left out: the OS carries some of each package's files, not its whole
// installation.
var dpkgFields = []string{"Package", "Priority", "Section", "Installed-Size", "Maintainer", "Architecture",
	"Multi-Arch", "source:Package", "source:Version", "Version", "binary:Summary", "Homepage"}

// dpkgStatus is a dpkg status file listing, as installed, the host's Debian packages that
// own files (host paths): the packages the conformance OS takes its files from.
func dpkgStatus(ctx context.Context, files []string) ([]byte, error) {
	dpkgQuery, err := exec.LookPath("dpkg-query")
	if err != nil {
		return nil, fmt.Errorf("the conformance OS's package list needs dpkg-query (Debian package dpkg): %w", err)
	}
	owners, err := debOwners(ctx, dpkgQuery, files)
	if err != nil {
		return nil, err
	}
	if len(owners) == 0 {
		// dpkg-query -W with no package would list the host's every package.
		return nil, errors.New("the conformance OS's package list: no files to find the packages of")
	}
	var format strings.Builder
	for i, f := range dpkgFields {
		if i > 0 {
			format.WriteString(`\t`)
		}
		format.WriteString("${" + f + "}")
	}
	format.WriteString(`\n`)
	out, err := exec.CommandContext(ctx, dpkgQuery, append([]string{"-W", "-f=" + format.String()}, owners...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-query -W %s: %w%s", strings.Join(owners, " "), err, stderrOf(err))
	}
	var status bytes.Buffer
	for line := range strings.SplitSeq(strings.TrimSuffix(string(out), "\n"), "\n") {
		v := strings.Split(line, "\t")
		if len(v) != len(dpkgFields) {
			return nil, fmt.Errorf("dpkg-query printed %q, not the %d fields asked for", line, len(dpkgFields))
		}
		writeParagraph(&status, v)
	}
	return status.Bytes(), nil
}

// writeParagraph writes one package's paragraph of the status file from its dpkgFields
// values, in the order dpkg writes them.
func writeParagraph(w *bytes.Buffer, v []string) {
	get := func(f string) string { return strings.TrimSpace(v[slices.Index(dpkgFields, f)]) }
	field := func(k, val string) {
		if val != "" {
			fmt.Fprintf(w, "%s: %s\n", k, val)
		}
	}
	pkg, version := get("Package"), get("Version")
	field("Package", pkg)
	w.WriteString("Status: install ok installed\n")
	for _, f := range []string{"Priority", "Section", "Installed-Size", "Maintainer", "Architecture"} {
		field(f, get(f))
	}
	if ma := get("Multi-Arch"); ma != "no" {
		field("Multi-Arch", ma)
	}
	// As dpkg writes it: the source's name when it differs, its version when that does too.
	switch src, srcVersion := get("source:Package"), get("source:Version"); {
	case srcVersion != "" && srcVersion != version:
		field("Source", src+" ("+srcVersion+")")
	case src != pkg:
		field("Source", src)
	}
	field("Version", version)
	field("Description", get("binary:Summary"))
	field("Homepage", get("Homepage"))
	w.WriteString("\n")
}

// debOwners returns the names of the Debian packages that own files, sorted. A path dpkg
// does not know is also tried in its merged-/usr spelling (/usr/lib and /lib name the same
// directory on Debian, and dpkg records the one the package shipped); a file no package
// owns is an error, since the conformance OS is made of Debian packages only.
func debOwners(ctx context.Context, dpkgQuery string, files []string) ([]string, error) {
	files = slices.Compact(slices.Sorted(slices.Values(files)))
	owners := map[string]bool{}
	var aliases, unowned []string
	found, err := dpkgSearch(ctx, dpkgQuery, files)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		switch pkgs, ok := found[f]; {
		case ok:
			for _, p := range pkgs {
				owners[p] = true
			}
		case usrMergeAlias(f) != "":
			aliases = append(aliases, usrMergeAlias(f))
		default:
			unowned = append(unowned, f)
		}
	}
	if len(aliases) > 0 {
		if found, err = dpkgSearch(ctx, dpkgQuery, aliases); err != nil {
			return nil, err
		}
		for _, a := range aliases {
			pkgs, ok := found[a]
			if !ok {
				unowned = append(unowned, a)
			}
			for _, p := range pkgs {
				owners[p] = true
			}
		}
	}
	if len(unowned) > 0 {
		return nil, fmt.Errorf("no Debian package owns %s: the conformance OS takes its files from Debian packages only", strings.Join(unowned, ", "))
	}
	return slices.Sorted(maps.Keys(owners)), nil
}

// dpkgSearch maps each of paths that dpkg knows to the packages that own it (dpkg-query
// -S, architecture qualifiers dropped).
func dpkgSearch(ctx context.Context, dpkgQuery string, paths []string) (map[string][]string, error) {
	out, err := exec.CommandContext(ctx, dpkgQuery, append([]string{"-S"}, paths...)...).Output()
	// Exit status 1 says some path has no owner; those are simply not in the answer.
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
		return nil, fmt.Errorf("dpkg-query -S: %w%s", err, stderrOf(err))
	}
	found := map[string][]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "diversion by ") {
			continue
		}
		pkgs, path, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("dpkg-query -S printed %q, not PACKAGE: PATH", line)
		}
		for p := range strings.SplitSeq(pkgs, ", ") {
			name, _, _ := strings.Cut(p, ":")
			found[path] = append(found[path], name)
		}
	}
	return found, nil
}

// usrMergeAlias is p's other spelling on a merged-/usr system, or "" when it has none.
func usrMergeAlias(p string) string {
	for _, d := range []string{"/bin/", "/sbin/", "/lib/", "/lib64/"} {
		switch {
		case strings.HasPrefix(p, d):
			return "/usr" + p
		case strings.HasPrefix(p, "/usr"+d):
			return strings.TrimPrefix(p, "/usr")
		}
	}
	return ""
}

// stderrOf is a failed command's standard error, as ": TEXT", or "".
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(bytes.TrimSpace(ee.Stderr)) > 0 {
		return ": " + string(bytes.TrimSpace(ee.Stderr))
	}
	return ""
}

// DebPackage is one package of the conformance OS's package database.
type DebPackage struct {
	Name, Version, Architecture string
}

// DebianPackages are the Debian packages the conformance OS built on this host is made of,
// as its package database lists them: what the agent reports of an installed node and a
// demo seed's SBOM names.
func DebianPackages(ctx context.Context) ([]DebPackage, error) {
	_, kver, err := findKernel("")
	if err != nil {
		return nil, err
	}
	// Any regular file stands in for the agent, which is no package's.
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	t := newTree()
	if err := populate(ctx, t, kver, self); err != nil {
		return nil, err
	}
	return parseDpkgStatus(t.files[DpkgStatusPath].data)
}

// parseDpkgStatus reads the installed packages of a dpkg status file.
func parseDpkgStatus(b []byte) ([]DebPackage, error) {
	var out []DebPackage
	for para := range strings.SplitSeq(string(b), "\n\n") {
		if strings.TrimSpace(para) == "" {
			continue
		}
		var p DebPackage
		var status string
		for line := range strings.SplitSeq(para, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "Package":
				p.Name = v
			case "Version":
				p.Version = v
			case "Architecture":
				p.Architecture = v
			case "Status":
				status = v
			}
		}
		if p.Name == "" || p.Version == "" {
			return nil, fmt.Errorf("dpkg status paragraph without a package name or version: %q", para)
		}
		if status == "install ok installed" {
			out = append(out, p)
		}
	}
	return out, nil
}

// MissingPackages returns the conformance OS's Debian packages (DebianPackages) that the
// SBOM doc does not name at their version, as "NAME VERSION": none for the SBOM of a seed
// of the conformance OS built on this host.
func MissingPackages(ctx context.Context, doc *spdx.Document) ([]string, error) {
	want, err := DebianPackages(ctx)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, p := range doc.Packages {
		have[p.PackageName+" "+p.PackageVersion] = true
	}
	var missing []string
	for _, p := range want {
		if !have[p.Name+" "+p.Version] {
			missing = append(missing, p.Name+" "+p.Version)
		}
	}
	return missing, nil
}
