package agent

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// Bounds on reading a package database: a query that runs longer or prints more than a
// database of wire.MaxPackages could is stopped, and its result reported as a failure.
const (
	packageQueryTimeout = 2 * time.Minute
	maxQueryOutput      = 16 << 20
	maxStatusFile       = 64 << 20
	maxQueryLine        = 64 << 10
)

// rpmDBPaths are where rpm keeps its database on RHCOS (/usr/lib/sysimage/rpm, also
// reached as /usr/share/rpm on ostree systems) and on older systems (/var/lib/rpm).
var rpmDBPaths = []string{"/usr/lib/sysimage/rpm", "/var/lib/rpm", "/usr/share/rpm"}

// rpmDBFiles are the database files of rpm's sqlite, ndb and bdb back ends.
var rpmDBFiles = []string{"rpmdb.sqlite", "Packages.db", "Packages"}

// dpkgAdminDir is dpkg's database directory; its status file lists the packages.
const dpkgAdminDir = "/var/lib/dpkg"

// Query formats: one tab-separated line per package.
const (
	rpmQueryFormat  = `%{NAME}\t%{EPOCH}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\n`
	dpkgQueryFormat = `${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n`
)

func gatherInventory(ctx context.Context, root string) wire.Inventory {
	return wire.Inventory{Packages: gatherPackages(ctx, root), Binaries: gatherBinaries(root)}
}

// gatherPackages lists the installed root's packages with the package manager whose
// database the root has: rpm where there is an rpm database (RHCOS), else dpkg-query where
// there is a dpkg status file, else none. The database decides, not the tools on the live
// system: busybox has rpm and dpkg applets that cannot answer these queries.
func gatherPackages(ctx context.Context, root string) *wire.PackageFacts {
	pf := &wire.PackageFacts{}
	pf.DistroID, pf.DistroVersion = osRelease(root)
	var err error
	switch rpmDB, dpkgStatus := findRPMDB(root), guestPath(root, dpkgAdminDir+"/status"); {
	case rpmDB != "":
		pf.Manager = wire.ManagerRPM
		err = queryRPM(ctx, root, rpmDB, pf)
	case isRegular(dpkgStatus):
		pf.Manager = wire.ManagerDpkg
		if q, lerr := exec.LookPath("dpkg-query"); lerr == nil {
			err = queryDpkg(ctx, q, guestPath(root, dpkgAdminDir), pf)
		} else {
			// The status file is the database dpkg-query reads; a system without
			// dpkg-query (the conformance OS's busybox) still has it.
			err = readDpkgStatus(dpkgStatus, pf)
		}
	default:
		pf.Reason = fmt.Sprintf("no rpm database (%s) and no dpkg status file (%s) on the installed root",
			strings.Join(rpmDBPaths, ", "), dpkgAdminDir+"/status")
		return pf
	}
	if err != nil {
		pf.Reason = err.Error()
		pf.Packages, pf.Total = nil, 0
		return pf
	}
	sort.Slice(pf.Packages, func(i, j int) bool {
		a, b := pf.Packages[i], pf.Packages[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Arch < b.Arch
	})
	if pf.Total > len(pf.Packages) {
		pf.Reason = fmt.Sprintf("the list holds the first %d of %d packages", len(pf.Packages), pf.Total)
	}
	return pf
}

// add records one installed package, keeping at most wire.MaxPackages.
func addPackage(pf *wire.PackageFacts, p wire.PackageFact) {
	pf.Total++
	if len(pf.Packages) < wire.MaxPackages {
		pf.Packages = append(pf.Packages, p)
	}
}

func findRPMDB(root string) string {
	for _, dir := range rpmDBPaths {
		for _, f := range rpmDBFiles {
			if isRegular(guestPath(root, dir+"/"+f)) {
				return dir
			}
		}
	}
	return ""
}

func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// queryRPM asks rpm for the packages of the database at dbPath on root.
func queryRPM(ctx context.Context, root, dbPath string, pf *wire.PackageFacts) error {
	args := []string{"--root", root, "--dbpath", dbPath, "-qa", "--qf", rpmQueryFormat}
	return runQuery(ctx, "rpm", args, func(line string) error {
		p, ok, err := parseRPMLine(line)
		if ok {
			addPackage(pf, p)
		}
		return err
	})
}

// parseRPMLine reads one line of rpmQueryFormat. gpg-pubkey entries are the keys rpm
// trusts, not software, and are left out (ok false).
func parseRPMLine(line string) (wire.PackageFact, bool, error) {
	f := strings.Split(line, "\t")
	if len(f) != 5 || f[0] == "" {
		return wire.PackageFact{}, false, fmt.Errorf("rpm printed %q, not name, epoch, version, release and arch", cut(line, 80))
	}
	none := func(s string) string {
		if s == "(none)" {
			return ""
		}
		return cleanField(s)
	}
	p := wire.PackageFact{Name: cleanField(f[0]), Epoch: none(f[1]), Version: cleanField(f[2]), Release: none(f[3]), Arch: none(f[4])}
	return p, p.Name != "gpg-pubkey", nil
}

// queryDpkg asks dpkg-query for the installed packages of the database in adminDir.
func queryDpkg(ctx context.Context, dpkgQuery, adminDir string, pf *wire.PackageFacts) error {
	args := []string{"--admindir=" + adminDir, "-W", "-f=" + dpkgQueryFormat}
	return runQuery(ctx, dpkgQuery, args, func(line string) error {
		p, ok, err := parseDpkgLine(line)
		if ok {
			addPackage(pf, p)
		}
		return err
	})
}

// parseDpkgLine reads one line of dpkgQueryFormat; only installed packages are ok (the
// database also lists removed ones whose configuration files remain).
func parseDpkgLine(line string) (wire.PackageFact, bool, error) {
	f := strings.Split(line, "\t")
	if len(f) != 4 || len(f[0]) < 2 || f[1] == "" {
		return wire.PackageFact{}, false, fmt.Errorf("dpkg-query printed %q, not status, package, version and architecture", cut(line, 80))
	}
	// The abbreviated status is want, state, error flag: state i is installed.
	if f[0][1] != 'i' {
		return wire.PackageFact{}, false, nil
	}
	return wire.PackageFact{Name: cleanField(f[1]), Version: cleanField(f[2]), Arch: cleanField(f[3])}, true, nil
}

// readDpkgStatus reads dpkg's status file directly: paragraphs of "Field: value" lines,
// one per package, "Status: install ok installed" for an installed one.
func readDpkgStatus(p string, pf *wire.PackageFacts) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("dpkg status file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxStatusFile))
	sc.Buffer(make([]byte, 0, 4096), maxQueryLine)
	var cur wire.PackageFact
	var installed bool
	flush := func() {
		if installed && cur.Name != "" {
			addPackage(pf, cur)
		}
		cur, installed = wire.PackageFact{}, false
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation of a multi-line field (Description, Conffiles)
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			cur.Name = cleanField(v)
		case "Version":
			cur.Version = cleanField(v)
		case "Architecture":
			cur.Arch = cleanField(v)
		case "Status":
			st := strings.Fields(v)
			installed = len(st) == 3 && st[2] == "installed"
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("dpkg status file %s: %w", p, err)
	}
	return nil
}

// runQuery runs a package query, handing each line of its output to each, within
// packageQueryTimeout and maxQueryOutput.
func runQuery(ctx context.Context, name string, args []string, each func(string) error) error {
	ctx, cancel := context.WithTimeout(ctx, packageQueryTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	stderr := &headBuffer{max: 1024}
	cmd.Stderr = stderr
	// A query stopped early may leave children holding its pipes: Wait gives up on them.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", name, err)
	}
	lr := &io.LimitedReader{R: out, N: maxQueryOutput}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), maxQueryLine)
	var perr error
	for sc.Scan() && perr == nil {
		perr = each(sc.Text())
	}
	if perr == nil {
		perr = sc.Err()
	}
	if perr == nil && lr.N <= 0 {
		perr = fmt.Errorf("it printed more than %d bytes", maxQueryOutput)
	}
	if perr != nil {
		cancel() // it may still be writing: stop it rather than drain it
	}
	werr := cmd.Wait()
	switch {
	case perr != nil:
		return fmt.Errorf("%s: %w", name, perr)
	case werr != nil:
		return fmt.Errorf("%s: %w: %s", name, werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	max int
	b   []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string { return strings.ToValidUTF8(string(h.b), "?") }

// cleanField bounds a value from the package database: valid UTF-8, no surrounding space,
// at most wire.MaxPackageField bytes.
func cleanField(s string) string {
	return cut(strings.TrimSpace(strings.ToValidUTF8(s, "?")), wire.MaxPackageField)
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// osRelease reads ID and VERSION_ID from the root's os-release.
func osRelease(root string) (id, version string) {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		f, err := os.Open(resolveUnder(root, p))
		if err != nil {
			continue
		}
		defer f.Close()
		sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
		for sc.Scan() {
			k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
			if !ok {
				continue
			}
			v = cleanField(strings.Trim(v, `"'`))
			switch k {
			case "ID":
				id = v
			case "VERSION_ID":
				version = v
			}
		}
		return id, version
	}
	return "", ""
}

// resolveUnder follows symbolic links of p inside root (an absolute target is taken from
// root, not from the live system), up to 8 of them, and returns the host path.
func resolveUnder(root, p string) string {
	for range 8 {
		full := guestPath(root, p)
		target, err := os.Readlink(full)
		if err != nil {
			return full
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		p = target
	}
	return guestPath(root, p)
}

// gatherBinaries describes the agent on the installed root or, when the root has none
// (an OpenShift node before its seal installs one), the running agent: the one the seal
// installs. Only one is hashed: under TCG hashing a binary of 80 MB takes seconds.
func gatherBinaries(root string) []wire.BinaryFact {
	installed := resolveUnder(root, AgentPath)
	switch _, err := os.Stat(installed); {
	case err == nil:
		return []wire.BinaryFact{describeBinary(AgentPath, installed, true)}
	case !errors.Is(err, fs.ErrNotExist):
		return []wire.BinaryFact{{Path: AgentPath, Installed: true, Error: err.Error()}}
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return []wire.BinaryFact{{Error: fmt.Sprintf("the running agent: %v", err)}}
	}
	return []wire.BinaryFact{describeBinary(self, self, false)}
}

// describeBinary hashes the binary at full (path is how the node names it) and reads its
// Go build information, without running it.
func describeBinary(path, full string, installed bool) wire.BinaryFact {
	b := wire.BinaryFact{Path: path, Installed: installed}
	sum, n, err := hashFile(full)
	if err != nil {
		b.Error = err.Error()
		return b
	}
	b.SHA256, b.Size = sum, n
	bi, err := buildinfo.ReadFile(full)
	if err != nil {
		b.Error = fmt.Sprintf("no Go build information: %v", err)
		return b
	}
	b.Module, b.Version = bi.Main.Path, versions.Of(bi)
	return b
}
