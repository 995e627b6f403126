package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/containers/storage"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// FactsOptions says where to gather facts from.
type FactsOptions struct {
	// Root is the installed system's root (on the conformance OS the directory Ignition
	// wrote to, e.g. /mnt/disk/root; on RHCOS /sysroot or /).
	Root string
	// BootDir holds the first-boot stamp; default Root/boot.
	BootDir string
	// IgnitionConfig is the config whose files, units and users are described ("" for none).
	IgnitionConfig string
	// GraphRoot, RunRoot and Driver open the containers-storage; an empty GraphRoot skips
	// the images.
	GraphRoot, RunRoot, Driver string
	// SysRoot is prepended to /proc and /sys paths; empty on a real node.
	SysRoot string
	// Clock stamps the facts; nil means the wall clock.
	Clock clock.Clock
}

// GatherFacts observes the installed system. Problems with single facts are recorded in
// Facts.Errors; only an unreadable Ignition config or root is an error.
func GatherFacts(ctx context.Context, o FactsOptions) (*wire.Facts, error) {
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, fmt.Errorf("facts root %s: %w", o.Root, err)
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("facts root %s: not a directory (%v)", root, err)
	}
	o.Root = root
	if o.BootDir == "" {
		o.BootDir = filepath.Join(root, "boot")
	}
	f := &wire.Facts{Version: wire.FactsVersion, Root: root}
	if o.IgnitionConfig != "" {
		decl, err := readDeclared(o.IgnitionConfig)
		if err != nil {
			return nil, err
		}
		ids := readIDs(root)
		f.Files = gatherFiles(root, decl, ids)
		f.Units = gatherUnits(root, decl.Systemd.Units)
		f.Users = gatherUsers(root, decl.Passwd.Users)
	}
	mounts, err := readMounts(filepath.Join(o.SysRoot, "/proc/self/mountinfo"))
	if err != nil {
		f.Errors = append(f.Errors, err.Error())
	}
	f.Boot = gatherBoot(o, mounts, f)
	f.Disk = gatherDisk(o, mounts, f.Boot, f)
	f.Leftovers = gatherLeftovers(o)
	f.Clock = gatherClock(root)
	f.Certs = gatherCerts(root)
	f.DNS = gatherDNS(ctx, root)
	if o.GraphRoot != "" {
		f.Images = gatherImages(ctx, o)
	}
	f.Inventory = gatherInventory(ctx, root)
	f.Time = clock.Or(o.Clock).Now().UTC()
	return f, ctx.Err()
}

// declared is the part of an Ignition config the facts describe; it has the same shape
// in every 3.x spec.
type declared struct {
	Storage struct {
		Files       []struct{ Path string } `json:"files"`
		Directories []struct{ Path string } `json:"directories"`
		Links       []struct{ Path string } `json:"links"`
	} `json:"storage"`
	Systemd struct {
		Units []struct {
			Name    string `json:"name"`
			Dropins []struct {
				Name string `json:"name"`
			} `json:"dropins"`
		} `json:"units"`
	} `json:"systemd"`
	Passwd struct {
		Users []struct {
			Name    string  `json:"name"`
			HomeDir *string `json:"homeDir"`
		} `json:"users"`
	} `json:"passwd"`
}

func readDeclared(path string) (*declared, error) {
	// --ignition-config is the caller's file: capped and regular, as agent report reads it.
	raw, err := smallfile.Read(path, MaxIgnitionConfigFile)
	if err != nil {
		return nil, fmt.Errorf("ignition config: %w", err)
	}
	var d declared
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("ignition config %s: %w", path, err)
	}
	return &d, nil
}

// ids maps numeric ids to names from the root's /etc/passwd and /etc/group.
type ids struct{ users, groups map[int]string }

func readIDs(root string) ids {
	read := func(p string) map[int]string {
		m := map[int]string{}
		for _, fields := range colonFile(filepath.Join(root, p)) {
			if len(fields) >= 3 {
				if id, err := strconv.Atoi(fields[2]); err == nil {
					m[id] = fields[0]
				}
			}
		}
		return m
	}
	return ids{users: read("/etc/passwd"), groups: read("/etc/group")}
}

// colonFile reads a passwd-style file; a missing file reads as empty.
func colonFile(path string) [][]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Split(line, ":"))
		}
	}
	return out
}

// guestPath joins a path from the config (always absolute in the guest) under root.
func guestPath(root, p string) string {
	return filepath.Join(root, filepath.Clean("/"+p))
}

func gatherFiles(root string, d *declared, ids ids) []wire.FileFact {
	var out []wire.FileFact
	add := func(kind, p string) {
		out = append(out, fileFact(root, kind, p, ids))
	}
	for _, f := range d.Storage.Directories {
		add(wire.KindDirectory, f.Path)
	}
	for _, f := range d.Storage.Files {
		add(wire.KindFile, f.Path)
	}
	for _, f := range d.Storage.Links {
		add(wire.KindLink, f.Path)
	}
	return out
}

func fileFact(root, kind, p string, ids ids) wire.FileFact {
	ff := wire.FileFact{Path: p, Declared: kind}
	full := guestPath(root, p)
	st, err := os.Lstat(full)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			ff.Error = err.Error()
		}
		return ff
	}
	ff.Exists = true
	ff.Mode = chmodBits(st.Mode())
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ff.UID, ff.GID = int(sys.Uid), int(sys.Gid)
		ff.User, ff.Group = ids.users[ff.UID], ids.groups[ff.GID]
	}
	switch {
	case st.Mode().IsRegular():
		ff.Kind = wire.KindFile
		sum, n, err := hashFile(full)
		if err != nil {
			ff.Error = err.Error()
		}
		ff.SHA256, ff.Size = sum, n
	case st.IsDir():
		ff.Kind = wire.KindDirectory
	case st.Mode()&fs.ModeSymlink != 0:
		ff.Kind = wire.KindLink
		ff.Target, _ = os.Readlink(full)
	default:
		ff.Kind = wire.KindOther
	}
	return ff
}

// chmodBits turns Go's file mode into the chmod number Ignition's mode field uses.
func chmodBits(m fs.FileMode) uint32 {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}

// hashFile streams the regular file at path through sha256. It has no cap (an installed
// system's binaries are large), but a FIFO or a device under --root is refused, not waited
// on or read without end.
func hashFile(path string) (string, int64, error) {
	f, err := smallfile.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", n, fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// unitDir is where Ignition writes units and their drop-ins.
const unitDir = "/etc/systemd/system"

func gatherUnits(root string, units []struct {
	Name    string `json:"name"`
	Dropins []struct {
		Name string `json:"name"`
	} `json:"dropins"`
}) []wire.UnitFact {
	presets := readPresets(root)
	var out []wire.UnitFact
	for _, u := range units {
		uf := wire.UnitFact{Name: u.Name}
		full := guestPath(root, unitDir+"/"+u.Name)
		if target, err := os.Readlink(full); err == nil && target == "/dev/null" {
			uf.Masked = true
		} else if sum, _, err := hashFile(full); err == nil {
			uf.Present, uf.SHA256 = true, sum
		}
		if p, ok := presets[u.Name]; ok {
			uf.Enabled, uf.Disabled = p.enable, !p.enable
			if p.enable {
				uf.EnabledBy = "preset " + p.file
			}
		}
		if !uf.Enabled {
			if wants, _ := filepath.Glob(guestPath(root, unitDir+"/*.wants/"+u.Name)); len(wants) > 0 {
				uf.Enabled, uf.EnabledBy = true, "link "+strings.TrimPrefix(wants[0], root)
			}
		}
		for _, d := range u.Dropins {
			df := wire.DropinFact{Name: d.Name}
			if sum, _, err := hashFile(guestPath(root, unitDir+"/"+u.Name+".d/"+d.Name)); err == nil {
				df.Present, df.SHA256 = true, sum
			}
			uf.Dropins = append(uf.Dropins, df)
		}
		out = append(out, uf)
	}
	return out
}

type preset struct {
	enable bool
	file   string
}

// readPresets reads the preset files a system honours, first match wins as in systemd:
// files sort by name across the directories, /etc before /usr/lib for the same name.
func readPresets(root string) map[string]preset {
	byName := map[string]string{}
	for _, dir := range []string{"/usr/lib/systemd/system-preset", "/etc/systemd/system-preset"} {
		matches, _ := filepath.Glob(guestPath(root, dir+"/*.preset"))
		for _, m := range matches {
			byName[filepath.Base(m)] = m // /etc overrides /usr/lib
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]preset{}
	for _, n := range names {
		b, err := os.ReadFile(byName[n])
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || (fields[0] != "enable" && fields[0] != "disable") {
				continue
			}
			if _, seen := out[fields[1]]; !seen {
				out[fields[1]] = preset{enable: fields[0] == "enable", file: strings.TrimPrefix(byName[n], root)}
			}
		}
	}
	return out
}

func gatherUsers(root string, users []struct {
	Name    string  `json:"name"`
	HomeDir *string `json:"homeDir"`
}) []wire.UserFact {
	passwd := map[string][]string{}
	for _, fields := range colonFile(filepath.Join(root, "/etc/passwd")) {
		passwd[fields[0]] = fields
	}
	var out []wire.UserFact
	for _, u := range users {
		uf := wire.UserFact{Name: u.Name}
		fields, ok := passwd[u.Name]
		if ok && len(fields) >= 6 {
			uf.Present = true
			uf.UID, _ = strconv.Atoi(fields[2])
			uf.Home = fields[5]
		}
		home := uf.Home
		if u.HomeDir != nil {
			home = *u.HomeDir
		}
		if home == "" {
			home = "/home/" + u.Name
		}
		uf.AuthorizedKeys = authorizedKeys(root, home)
		out = append(out, uf)
	}
	return out
}

// authorizedKeys hashes the keys of a home's authorized_keys and authorized_keys.d/*
// (Ignition writes the latter on systems that read it).
func authorizedKeys(root, home string) []string {
	files := []string{guestPath(root, home+"/.ssh/authorized_keys")}
	frags, _ := filepath.Glob(guestPath(root, home+"/.ssh/authorized_keys.d/*"))
	files = append(files, frags...)
	var out []string
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if h := wire.SSHKeyHash(line); h != "" {
				out = append(out, h)
			}
		}
	}
	return out
}

// BootstrapLeftovers are the paths that must be gone from an installed node, relative to
// Root unless they start with "boot:" (relative to BootDir). OpenShift's are those of
// bootstrap-in-place (seed 003): the bootstrap control plane's secrets and configs and
// bootkube's working files. The conformance OS's are its first-boot stamp (Ignition
// would run again on the next boot) and an interrupted image import's scratch copy.
func BootstrapLeftovers() []wire.PathFact {
	return []wire.PathFact{
		{Path: "/etc/kubernetes/bootstrap-secrets", What: "bootstrap control plane secrets"},
		{Path: "/etc/kubernetes/bootstrap-configs", What: "bootstrap control plane configs"},
		{Path: "/opt/openshift", What: "bootkube working directory"},
		{Path: "/opt/openshift/.bootkube.done", What: "bootkube completion stamp"},
		{Path: "/usr/local/bin/bootkube.sh", What: "bootkube script"},
		{Path: "boot:/ignition.firstboot", What: "first-boot stamp (Ignition would run again)"},
		{Path: "/var/tmp/precache-*", What: "image import scratch copy"},
	}
}

func gatherLeftovers(o FactsOptions) []wire.PathFact {
	out := BootstrapLeftovers()
	for i, l := range out {
		base, p := o.Root, l.Path
		if rest, ok := strings.CutPrefix(p, "boot:"); ok {
			base, p = o.BootDir, rest
		}
		matches, _ := filepath.Glob(guestPath(base, p))
		for _, m := range matches {
			if _, err := os.Lstat(m); err == nil {
				out[i].Exists = true
			}
		}
	}
	return out
}

func gatherClock(root string) wire.ClockFacts {
	var c wire.ClockFacts
	// The files whose presence says the node keeps its clock in sync.
	for _, p := range []string{"/etc/chrony.conf", "/etc/chrony/chrony.conf", "/etc/ntp.conf", "/etc/systemd/timesyncd.conf", "/etc/ntpd.conf"} {
		if _, err := os.Stat(guestPath(root, p)); err == nil {
			c.SyncConfigs = append(c.SyncConfigs, p)
		}
	}
	return c
}

// gatherCerts describes the kubelet's certificates. The files hold the private key as
// well; only the certificate's metadata is read from them.
func gatherCerts(root string) []wire.CertFact {
	var out []wire.CertFact
	// The kubelet's current certificates (symlinks the kubelet rotates).
	for _, c := range []struct{ name, path string }{
		{wire.CertKubeletClient, "/var/lib/kubelet/pki/kubelet-client-current.pem"},
		{wire.CertKubeletServing, "/var/lib/kubelet/pki/kubelet-server-current.pem"},
	} {
		b, err := os.ReadFile(guestPath(root, c.path))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		cf := wire.CertFact{Name: c.name, Path: c.path}
		if err != nil {
			cf.Error = err.Error()
		} else if cert, err := firstCert(b); err != nil {
			cf.Error = err.Error()
		} else {
			cf.Subject, cf.Issuer = cert.Subject.String(), cert.Issuer.String()
			cf.NotBefore, cf.NotAfter = cert.NotBefore.UTC(), cert.NotAfter.UTC()
		}
		out = append(out, cf)
	}
	return out
}

func firstCert(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no CERTIFICATE block")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

func gatherImages(ctx context.Context, o FactsOptions) *wire.ImageFacts {
	driver := o.Driver
	if driver == "" {
		driver = "overlay"
	}
	out := &wire.ImageFacts{GraphRoot: o.GraphRoot, Driver: driver}
	store, err := storage.GetStore(storage.StoreOptions{GraphRoot: o.GraphRoot, RunRoot: o.RunRoot, GraphDriverName: driver})
	if err != nil {
		out.Error = fmt.Sprintf("opening containers-storage at %s: %v", o.GraphRoot, err)
		return out
	}
	defer store.Shutdown(false)
	imgs, err := store.Images()
	if err != nil {
		out.Error = fmt.Sprintf("listing images in %s: %v", o.GraphRoot, err)
		return out
	}
	for _, img := range imgs {
		if ctx.Err() != nil {
			break
		}
		f := wire.ImageFact{ID: img.ID, Names: img.Names, Digest: img.Digest.String()}
		for _, d := range img.Digests {
			f.Digests = append(f.Digests, d.String())
		}
		out.Images = append(out.Images, f)
	}
	sort.Slice(out.Images, func(i, j int) bool { return out.Images[i].ID < out.Images[j].ID })
	return out
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ point, source, fstype string }

func readMounts(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 2 {
			continue
		}
		out = append(out, mount{point: unescapeMount(a[4]), fstype: b[0], source: unescapeMount(b[1])})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf returns the mount holding path: the last mount (mounts stack) at the longest
// mount point that is a prefix of path.
func mountOf(mounts []mount, path string) (mount, bool) {
	var best mount
	found := false
	for _, m := range mounts {
		if m.point == path || m.point == "/" || strings.HasPrefix(path, strings.TrimSuffix(m.point, "/")+"/") {
			if !found || len(m.point) >= len(best.point) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// liveFSType reports whether a live system's root lives on filesystems of type t.
func liveFSType(t string) bool {
	switch t {
	case "rootfs", "tmpfs", "ramfs", "overlay", "squashfs", "iso9660":
		return true
	}
	return false
}

func gatherBoot(o FactsOptions, mounts []mount, f *wire.Facts) wire.BootFacts {
	var b wire.BootFacts
	raw, err := os.ReadFile(filepath.Join(o.SysRoot, "/proc/cmdline"))
	if err != nil {
		f.Errors = append(f.Errors, fmt.Sprintf("kernel command line: %v", err))
	}
	b.Cmdline = strings.TrimSpace(string(raw))
	var liveArg string
	for _, arg := range strings.Fields(b.Cmdline) {
		switch {
		case strings.HasPrefix(arg, "root=LABEL="):
			b.RootLabel = strings.TrimPrefix(arg, "root=LABEL=")
		case strings.HasPrefix(arg, "snofactory.root=LABEL="):
			b.RootLabel = strings.TrimPrefix(arg, "snofactory.root=LABEL=")
		case strings.HasPrefix(arg, "coreos.liveiso="), strings.HasPrefix(arg, "coreos.inst.install_dev="):
			liveArg = arg
		}
	}
	m, ok := mountOf(mounts, o.Root)
	if !ok {
		b.Live, b.LiveReason = true, "no mount holds "+o.Root
		return b
	}
	b.MountPoint, b.Source, b.FSType = m.point, m.source, m.fstype
	dev := filepath.Base(m.source)
	switch {
	case liveFSType(m.fstype):
		b.Live, b.LiveReason = true, fmt.Sprintf("%s is on %s (%s), a live filesystem", o.Root, m.point, m.fstype)
	case !strings.HasPrefix(m.source, "/dev/") || strings.HasPrefix(dev, "sr") || strings.HasPrefix(dev, "loop") || strings.HasPrefix(dev, "ram"):
		b.Live, b.LiveReason = true, fmt.Sprintf("%s is on %s, not an installed disk", o.Root, m.source)
	case liveArg != "":
		b.Live, b.LiveReason = true, "the kernel command line has "+liveArg
	}
	return b
}

func gatherDisk(o FactsOptions, mounts []mount, boot wire.BootFacts, f *wire.Facts) wire.DiskFacts {
	var d wire.DiskFacts
	var st syscall.Statfs_t
	if err := syscall.Statfs(o.Root, &st); err != nil {
		f.Errors = append(f.Errors, fmt.Sprintf("free space of %s: %v", o.Root, err))
	} else {
		d.TotalBytes = st.Blocks * uint64(st.Bsize)
		d.FreeBytes = st.Bavail * uint64(st.Bsize)
	}
	for _, m := range mounts {
		if boot.MountPoint != "" && (m.point == boot.MountPoint || strings.HasPrefix(m.point, strings.TrimSuffix(boot.MountPoint, "/")+"/")) {
			d.Mounts = append(d.Mounts, wire.MountFact{MountPoint: m.point, Source: m.source, FSType: m.fstype})
		}
	}
	if !strings.HasPrefix(boot.Source, "/dev/") {
		return d
	}
	d.Device = boot.Source
	sys := filepath.Join(o.SysRoot, "/sys/class/block")
	name := filepath.Base(boot.Source)
	disk := name
	if _, err := os.Stat(filepath.Join(sys, name, "partition")); err == nil {
		// A partition's sysfs directory sits inside its disk's.
		if real, err := filepath.EvalSymlinks(filepath.Join(sys, name)); err == nil {
			disk = filepath.Base(filepath.Dir(real))
		}
	}
	d.Disk = "/dev/" + disk
	d.DiskBytes = sectors(filepath.Join(sys, disk, "size"))
	parts, _ := filepath.Glob(filepath.Join(sys, disk, disk+"*", "partition"))
	for _, p := range parts {
		dir := filepath.Dir(p)
		n, _ := strconv.Atoi(strings.TrimSpace(readString(p)))
		d.Partitions = append(d.Partitions, wire.PartitionFact{Name: filepath.Base(dir), Number: n, Bytes: sectors(filepath.Join(dir, "size"))})
	}
	sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Number < d.Partitions[j].Number })
	return d
}

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// sectors reads a sysfs size file (512-byte sectors whatever the device's block size).
func sectors(p string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(readString(p)), 10, 64)
	return n * 512
}
