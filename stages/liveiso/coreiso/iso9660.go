package coreiso

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/kdomanski/iso9660"
)

const (
	sectorSize = 2048
	// systemAreaSize is the ISO 9660 System Area before the first volume descriptor.
	systemAreaSize = 16 * sectorSize
	// maxDirSize bounds how much of a directory extent we read; real live ISO
	// directories are a few sectors, a crafted one must not make us read gigabytes.
	maxDirSize = 16 << 20
	// maxDepth bounds the tree walk against directory loops.
	maxDepth = 16
	// maxDescriptors bounds the volume descriptor scan.
	maxDescriptors = 64
)

// isoFile is one file or directory of the ISO 9660 tree, with its extent.
type isoFile struct {
	Path   string // slash-separated, relative to the root (Rock Ridge names where present)
	Offset int64  // byte offset of the extent in the image
	Length int64
	IsDir  bool
	// isoName is the plain ISO 9660 name, matched as well as the Rock Ridge one.
	isoName string
}

// isoFS is a bounded ISO 9660 reader: enough to find files and their extents.
type isoFS struct {
	name string
	r    io.ReaderAt
	size int64
	root isoFile
}

// openISOFS reads the volume descriptors of the image name (read through r,
// size bytes long) and returns a reader for its primary volume.
func openISOFS(name string, r io.ReaderAt, size int64) (*isoFS, error) {
	if size < systemAreaSize+sectorSize {
		return nil, fmt.Errorf("%s: %w: %d bytes is too small to hold ISO 9660 volume descriptors (need at least %d)",
			name, ErrNotISO, size, systemAreaSize+sectorSize)
	}
	fs := &isoFS{name: name, r: r, size: size}
	buf := make([]byte, sectorSize)
	for i := 0; i < maxDescriptors; i++ {
		off := int64(systemAreaSize + i*sectorSize)
		if off+sectorSize > size {
			break
		}
		if _, err := r.ReadAt(buf, off); err != nil {
			return nil, fmt.Errorf("%s: reading volume descriptor at byte %d: %w", name, off, err)
		}
		if string(buf[1:6]) != "CD001" {
			if i == 0 {
				return nil, fmt.Errorf("%s: %w: no \"CD001\" signature at byte %d (is this really an ISO image?)", name, ErrNotISO, off+1)
			}
			return nil, fmt.Errorf("%s: %w: volume descriptor %d at byte %d lacks the \"CD001\" signature", name, ErrMalformed, i, off)
		}
		switch buf[0] {
		case 1: // primary volume descriptor; the root record sits at bytes 156..189
			root, err := fs.parseRecord(buf[156:190])
			if err != nil {
				return nil, fmt.Errorf("%s: primary volume descriptor root record: %w", name, err)
			}
			if !root.IsDir {
				return nil, fmt.Errorf("%s: %w: root record is not a directory", name, ErrMalformed)
			}
			root.Path = ""
			fs.root = root
			return fs, nil
		case 255: // terminator
			return nil, fmt.Errorf("%s: %w: no primary volume descriptor before the terminator", name, ErrNotISO)
		}
	}
	return nil, fmt.Errorf("%s: %w: no primary volume descriptor found", name, ErrNotISO)
}

// parseRecord decodes one directory record, checking that it and its extent
// lie inside the record buffer and the image.
func (fs *isoFS) parseRecord(rec []byte) (isoFile, error) {
	if len(rec) < 34 || int(rec[0]) < 34 || int(rec[0]) > len(rec) {
		return isoFile{}, fmt.Errorf("%w: directory record too short", ErrMalformed)
	}
	rec = rec[:rec[0]]
	if 33+int(rec[32]) > len(rec) {
		return isoFile{}, fmt.Errorf("%w: directory record name runs past the record", ErrMalformed)
	}
	var de iso9660.DirectoryEntry
	if err := de.UnmarshalBinary(rec); err != nil {
		return isoFile{}, fmt.Errorf("%w: directory record: %v", ErrMalformed, err)
	}
	if de.ExtentLocation < 0 {
		return isoFile{}, fmt.Errorf("%w: negative extent location %d", ErrMalformed, de.ExtentLocation)
	}
	f := isoFile{
		Path:    isoName(de.Identifier),
		isoName: isoName(de.Identifier),
		Offset:  int64(de.ExtentLocation) * sectorSize,
		Length:  int64(de.ExtentLength),
		IsDir:   de.FileFlags&0x02 != 0,
	}
	if rr := rockRidgeName(de.SystemUse); rr != "" {
		f.Path = rr
	}
	if f.Offset+f.Length > fs.size {
		shown := f.Path
		if shown == "\x00" || shown == "\x01" {
			shown = "." // a directory's self or parent record
		}
		return isoFile{}, fmt.Errorf("%w: extent of %q (bytes %d..%d) lies outside the %d-byte image",
			ErrMalformed, shown, f.Offset, f.Offset+f.Length, fs.size)
	}
	return f, nil
}

// rockRidgeName returns the Rock Ridge NM name from a record's System Use
// field, or "". Continuation areas are not followed: names of the files we
// look for are short, and not chasing pointers keeps a crafted image harmless.
func rockRidgeName(su []byte) string {
	var name []byte
	for len(su) >= 4 {
		n := int(su[2])
		if n < 4 || n > len(su) {
			break
		}
		if su[0] == 'N' && su[1] == 'M' && n >= 5 {
			flags := su[4]
			if flags&0x06 != 0 { // "." or ".." aliases
				return ""
			}
			name = append(name, su[5:n]...)
		}
		su = su[n:]
	}
	if bytes.ContainsAny(name, "/\x00") || string(name) == "." || string(name) == ".." {
		return ""
	}
	return string(name)
}

// isoName turns an ISO 9660 identifier into a plain name: version and a
// trailing dot dropped.
func isoName(id string) string {
	if i := strings.IndexByte(id, ';'); i >= 0 {
		id = id[:i]
	}
	return strings.TrimSuffix(id, ".")
}

// readDir lists a directory, without "." and "..".
func (fs *isoFS) readDir(dir isoFile) ([]isoFile, error) {
	if !dir.IsDir {
		return nil, fmt.Errorf("%s: /%s is not a directory", fs.name, dir.Path)
	}
	if dir.Length > maxDirSize {
		return nil, fmt.Errorf("%s: %w: directory /%s claims %d bytes", fs.name, ErrMalformed, dir.Path, dir.Length)
	}
	data := make([]byte, dir.Length)
	if _, err := fs.r.ReadAt(data, dir.Offset); err != nil {
		return nil, fmt.Errorf("%s: reading directory /%s: %w", fs.name, dir.Path, err)
	}
	var out []isoFile
	for sec := 0; sec < len(data); sec += sectorSize {
		end := min(sec+sectorSize, len(data))
		for i := sec; i < end; {
			n := int(data[i])
			if n == 0 { // rest of the sector is padding
				break
			}
			if i+n > end {
				return nil, fmt.Errorf("%s: %w: record at byte %d of directory /%s crosses its sector", fs.name, ErrMalformed, i, dir.Path)
			}
			f, err := fs.parseRecord(data[i : i+n])
			if err != nil {
				return nil, fmt.Errorf("%s: directory /%s: %w", fs.name, dir.Path, err)
			}
			i += n
			if f.Path == "\x00" || f.Path == "\x01" {
				continue
			}
			f.Path = path.Join(dir.Path, f.Path)
			out = append(out, f)
		}
	}
	return out, nil
}

// errNotFound marks a path missing from the image (as opposed to a broken image).
var errNotFound = errors.New("not found")

// lookup finds a file by its Rock Ridge-style path (e.g. "coreos/igninfo.json"),
// matching ISO 9660 names case-insensitively and allowing for 8.3 truncation.
func (fs *isoFS) lookup(p string) (isoFile, error) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) > maxDepth {
		return isoFile{}, fmt.Errorf("%s: path %q is too deep", fs.name, p)
	}
	cur := fs.root
	for _, part := range parts {
		if part == "" || part == "." || part == ".." {
			return isoFile{}, fmt.Errorf("%s: invalid path %q", fs.name, p)
		}
		entries, err := fs.readDir(cur)
		if err != nil {
			return isoFile{}, err
		}
		found := false
		for _, e := range entries {
			if nameMatches(path.Base(e.Path), part) || nameMatches(e.isoName, part) {
				cur, found = e, true
				break
			}
		}
		if !found {
			return isoFile{}, fmt.Errorf("%s: /%s: %w", fs.name, p, errNotFound)
		}
	}
	return cur, nil
}

// nameMatches reports whether an ISO 9660 name stands for want: equal ignoring
// case, or equal to want cut to an 8-character base and 3-character extension
// the way mkisofs-style tools shorten names.
func nameMatches(isoName, want string) bool {
	if strings.EqualFold(isoName, want) {
		return true
	}
	base, ext, hasExt := strings.Cut(want, ".")
	if hasExt && len(ext) > 3 {
		ext = ext[:3]
	}
	if len(base) > 8 {
		base = base[:8]
	}
	short := base
	if hasExt {
		short += "." + ext
	}
	return strings.EqualFold(isoName, short)
}

// readFile returns the contents of a regular file, refusing unreasonably
// large ones (these are small JSON files).
func (fs *isoFS) readFile(f isoFile, limit int64) ([]byte, error) {
	if f.IsDir {
		return nil, fmt.Errorf("%s: /%s is a directory", fs.name, f.Path)
	}
	if f.Length > limit {
		return nil, fmt.Errorf("%s: %w: /%s is %d bytes, more than the %d expected", fs.name, ErrMalformed, f.Path, f.Length, limit)
	}
	buf := make([]byte, f.Length)
	if _, err := fs.r.ReadAt(buf, f.Offset); err != nil {
		return nil, fmt.Errorf("%s: reading /%s: %w", fs.name, f.Path, err)
	}
	return buf, nil
}

// walk lists every file of the image (directories excluded), bounded in depth
// and count, for mapping absolute offsets back to files.
func (fs *isoFS) walk() ([]isoFile, error) {
	var out []isoFile
	seen := map[int64]bool{}
	var visit func(d isoFile, depth int) error
	visit = func(d isoFile, depth int) error {
		if depth > maxDepth || seen[d.Offset] {
			return nil
		}
		seen[d.Offset] = true
		entries, err := fs.readDir(d)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir {
				if err := visit(e, depth+1); err != nil {
					return err
				}
				continue
			}
			out = append(out, e)
			if len(out) > 100000 {
				return fmt.Errorf("%s: %w: more than 100000 files", fs.name, ErrMalformed)
			}
		}
		return nil
	}
	if err := visit(fs.root, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// hasPrefix reports whether b starts with the magic string.
func hasPrefix(b []byte, magic string) bool { return bytes.HasPrefix(b, []byte(magic)) }
