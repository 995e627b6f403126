package seed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// ErrBadSeed marks what is wrong with a seed itself (a crafted or damaged one), as opposed
// to the machine reading it: commands exit 2 on it, as on any bad input.
var ErrBadSeed = errors.New("not a valid seed")

// BadSeedError is one thing wrong with a seed's files, found before any of it is used.
type BadSeedError struct {
	File    string // name inside the seed directory
	Problem string
}

func (e *BadSeedError) Error() string { return e.File + ": " + e.Problem }

// Unwrap makes every BadSeedError an ErrBadSeed.
func (e *BadSeedError) Unwrap() error { return ErrBadSeed }

// maxManifestSize bounds seed.json: real ones are a few KiB.
const maxManifestSize = 1 << 20

// CheckDir refuses a seed directory holding anything but regular files and directories:
// a symlink, device, FIFO or socket in a seed is never followed or opened, whatever its
// name. Every such entry is reported at once.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("reading the seed directory: %w", err)
	}
	if !fi.IsDir() {
		return &BadSeedError{File: dir, Problem: "is not a directory"}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading the seed directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if kind := notData(e.Type()); kind != "" {
			errs = append(errs, &BadSeedError{File: e.Name(), Problem: "is " + kind + "; a seed holds regular files only, and none is followed"})
		}
	}
	return errors.Join(errs...)
}

// notData names a file mode that is not a regular file or directory ("" for those).
func notData(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir(), m.IsRegular():
		return ""
	}
	return "not a regular file"
}

// openStored opens the seed file name in dir as data: never through a symlink
// (O_NOFOLLOW), never blocking on a FIFO (O_NONBLOCK), and only when it is a regular file
// of exactly size bytes (size < 0: at most -size bytes). The caller reads at most that.
func openStored(dir, name string, size int64) (*os.File, error) {
	if name != filepath.Base(name) || name == "." || name == ".." {
		return nil, &BadSeedError{File: name, Problem: "names a path, not a file of the seed directory"}
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &BadSeedError{File: name, Problem: "is a symbolic link; a seed's files are read as data, never followed"}
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, unwrapPath(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, &BadSeedError{File: name, Problem: "is " + notData(fi.Mode().Type()) + "; a seed holds regular files only"}
	case size >= 0 && fi.Size() != size:
		f.Close()
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("holds %d bytes, the manifest says %d", fi.Size(), size)}
	case size < 0 && fi.Size() > -size:
		f.Close()
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("holds %d bytes, more than the %d allowed", fi.Size(), -size)}
	}
	// Back to blocking reads: the file is regular, so this only undoes O_NONBLOCK.
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	return f, nil
}

// unwrapPath drops the *PathError's path, which the caller names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// qcow2 header fields (QEMU docs/interop/qcow2.txt), big-endian.
const (
	qcow2Magic             = 0x514649fb // "QFI\xfb"
	qcow2HeaderV2          = 72
	qcow2IncompatDataFile  = 1 << 2
	qcow2KnownIncompatible = 1<<0 | 1<<1 | 1<<3 | 1<<4 // dirty, corrupt, compression type, extended L2
	qcow2ExtBackingFormat  = 0xe2792aca
	qcow2ExtDataFile       = 0x44415441
	qcow2MaxExtensions     = 64
)

// checkQCOW2 reads a qcow2 image's header and refuses anything that makes qemu open another
// file: a backing file, an external data file (the feature bit or its name extension), a
// backing format extension, or an incompatible feature this reader does not know. The
// virtual size must be the one the manifest declares (virtualSize < 0: not known yet, when
// the sealer measures its own disk), so no read goes beyond it.
func checkQCOW2(r io.ReaderAt, name string, virtualSize int64) error {
	hdr := make([]byte, 104)
	if _, err := r.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the qcow2 header of %s: %w", name, err)
	}
	be := binary.BigEndian
	bad := func(format string, args ...any) error {
		return &BadSeedError{File: name, Problem: fmt.Sprintf(format, args...)}
	}
	if be.Uint32(hdr[0:]) != qcow2Magic {
		return bad("is not a qcow2 image, as the manifest says it is")
	}
	version := be.Uint32(hdr[4:])
	if version != 2 && version != 3 {
		return bad("is qcow2 version %d; only versions 2 and 3 are read", version)
	}
	if off := be.Uint64(hdr[8:]); off != 0 {
		return bad("names a backing file: a seed's disk must hold all of its data, and no other file is opened")
	}
	clusterBits := be.Uint32(hdr[20:])
	if clusterBits < 9 || clusterBits > 21 {
		return bad("has an invalid cluster size (2^%d)", clusterBits)
	}
	if size := be.Uint64(hdr[24:]); virtualSize >= 0 && size != uint64(virtualSize) {
		return bad("has a virtual size of %d bytes, the manifest says %d", size, virtualSize)
	}
	headerLen := uint64(qcow2HeaderV2)
	if version == 3 {
		incompatible := be.Uint64(hdr[72:])
		if incompatible&qcow2IncompatDataFile != 0 {
			return bad("keeps its data in an external data file: a seed's disk must hold all of its data, and no other file is opened")
		}
		if unknown := incompatible &^ qcow2KnownIncompatible; unknown != 0 {
			return bad("uses incompatible qcow2 features this version does not read (bits %#x)", unknown)
		}
		headerLen = uint64(be.Uint32(hdr[100:]))
		if headerLen < 104 {
			return bad("has a qcow2 v3 header of %d bytes", headerLen)
		}
	}
	// Header extensions follow the header, within the first cluster.
	cluster := uint64(1) << clusterBits
	off := (headerLen + 7) &^ 7
	ext := make([]byte, 8)
	for i := 0; i < qcow2MaxExtensions && off+8 <= cluster; i++ {
		if _, err := r.ReadAt(ext, int64(off)); err != nil {
			return bad("has a truncated qcow2 header extension")
		}
		typ, length := be.Uint32(ext[0:]), uint64(be.Uint32(ext[4:]))
		switch typ {
		case 0:
			return nil
		case qcow2ExtDataFile:
			return bad("names an external data file: a seed's disk must hold all of its data, and no other file is opened")
		case qcow2ExtBackingFormat:
			return bad("names a backing file format: a seed's disk has no backing file")
		}
		off += 8 + (length+7)&^7
	}
	if off+8 > cluster {
		return bad("has qcow2 header extensions beyond its first cluster")
	}
	return bad("has more than %d qcow2 header extensions", qcow2MaxExtensions)
}

// Check makes the cheap checks of a seed directory, reading no disk through: only regular
// files, a valid manifest, each declared file at its declared size, each qcow2 header
// free of references to other files. Use it before handing a seed's files to another
// program (qemu).
func Check(dir string) (*Manifest, error) {
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	return m, checkFiles(dir, m)
}

// checkFiles opens every file the manifest declares as data, at its declared size, and
// checks each qcow2 disk's header: the cheap checks that come before any long read or
// any write, whichever of the files a command goes on to use.
func checkFiles(dir string, m *Manifest) error {
	var errs []error
	check := func(name string, size int64, check func(*os.File) error) {
		f, err := openStored(dir, name, size)
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer f.Close()
		if check != nil {
			if err := check(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, d := range m.Disks {
		var hdr func(*os.File) error
		if d.Format == FormatQCOW2 {
			hdr = func(f *os.File) error { return checkQCOW2(f, d.File, d.VirtualSize) }
		}
		check(d.File, d.Size, hdr)
		if x := d.Index; x != nil {
			check(x.File, x.Size, nil)
		}
	}
	if c := m.Credentials; c != nil {
		check(c.File, c.Size, nil)
	}
	if x := m.SBOM; x != nil {
		check(x.File, x.Size, nil)
	}
	return errors.Join(errs...)
}

// Paths are the paths, under dir, of every file the manifest declares, seed.json included:
// what a command that reads the seed must never write over.
func (m *Manifest) Paths(dir string) []string {
	var paths []string
	for _, n := range m.files() {
		paths = append(paths, filepath.Join(dir, n))
	}
	return paths
}

// files are the names of every file the manifest declares, seed.json included.
func (m *Manifest) files() []string {
	names := []string{ManifestFile}
	for _, d := range m.Disks {
		names = append(names, d.File)
		if d.Index != nil {
			names = append(names, d.Index.File)
		}
	}
	if m.Credentials != nil {
		names = append(names, m.Credentials.File)
	}
	if m.SBOM != nil {
		names = append(names, m.SBOM.File)
	}
	return names
}

// declaredFormat tells the disk formats a manifest may declare, and only these are opened.
func declaredFormat(format string) bool {
	return slices.Contains([]string{FormatQCOW2, FormatRaw, FormatChunked}, format)
}
