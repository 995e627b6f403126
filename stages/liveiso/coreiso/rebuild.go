package coreiso

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"

	"github.com/snofactory/snofactory/pipeline"
)

// rebuildHeadroom is extra room left in a grown embed area, so a later,
// slightly larger config still fits without another rebuild.
const (
	rebuildHeadroom = 256 << 10
	rebuildAlign    = 64 << 10
)

// rebuildInto embeds e.oversized by growing a copy of iso made beside it (a
// symlink's target: its file system has room for it), then writes the result
// over dst: the ISO opened in place, keeping the file the user named, or a
// block device. Nothing is replaced until the copy has been grown and checked.
// Returns the new area size.
func rebuildInto(ctx context.Context, iso *ISO, dst *os.File, e edits, c Customization) (int64, error) {
	target, err := filepath.EvalSymlinks(iso.Path)
	if err != nil {
		return 0, err
	}
	work, err := os.MkdirTemp(filepath.Dir(target), ".liveiso-rebuild-*")
	if err != nil {
		return 0, fmt.Errorf("creating rebuild work directory: %w", err)
	}
	defer os.RemoveAll(work)
	// 0600: it will carry the embedded config
	built, err := os.OpenFile(filepath.Join(work, "out.iso"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	defer built.Close()
	if err := copyInto(ctx, built, iso.f, iso.size); err != nil {
		return 0, fmt.Errorf("copying %s for the rebuild: %w", iso.Path, err)
	}
	area, err := grow(ctx, iso, built, e, c)
	if err != nil {
		return 0, err
	}
	return area, overwrite(ctx, dst, built.Name())
}

// checkGrowable refuses a rebuild the embed area cannot take part in: only an
// area that is a whole file can be replaced by a larger one.
func checkGrowable(iso *ISO, payload int) error {
	area := iso.Layout.Ignition
	if area.WholeFile && area.File != "" {
		return nil
	}
	where := "the legacy System Area header"
	if area.File != "" {
		where = fmt.Sprintf("part of %s", area.File)
	}
	return fmt.Errorf("%s: %w: compressed initrd is %d bytes but the embed area (%s) holds %d, and an area that is %s cannot be grown",
		iso.Path, ErrTooLarge, payload, area.Source, area.Length, where)
}

// grow embeds e.oversized into f, a copy of iso, with xorriso's
// multi-session growing: a new session holds a larger embed area file, an
// igninfo.json naming it and, for legacy karg areas, a kargs.json, and on a
// file xorriso rewrites the superblock at LBA 16 and the hybrid MBR and GPT
// for the new size. Only those files and the new directory tree are written,
// where a full rebuild (xorriso -outdev) rewrote the whole gigabyte. The boot
// configs load the area file by path, so the result boots with the config;
// the El Torito and hybrid boot records are replayed. The old area is zeroed
// first, so the config it held does not outlive the rebuild in sectors
// nothing points at; stale legacy headers are cleared, e.kargs set, and the
// result is read back. Returns the new area size.
func grow(ctx context.Context, iso *ISO, f *os.File, e edits, c Customization) (int64, error) {
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		return 0, fmt.Errorf("rebuilding the ISO for an oversized config needs xorriso (Debian package xorriso): %w", err)
	}
	c.logger().InfoContext(ctx, "Ignition payload exceeds the embed area; rebuilding the ISO",
		"iso", iso.Path, "payload", len(e.oversized), "area", iso.Layout.Ignition.Length)
	work, err := os.MkdirTemp("", "liveiso-rebuild-*")
	if err != nil {
		return 0, fmt.Errorf("creating rebuild work directory: %w", err)
	}
	defer os.RemoveAll(work)
	maps, err := writeRebuildFiles(iso, work, e.oversized)
	if err != nil {
		return 0, err
	}
	old := iso.Layout.Ignition
	if _, err := applyPatches(f, []patch{{old.Offset, make([]byte, old.Length)}}); err != nil {
		return 0, fmt.Errorf("clearing the old embed area: %w", err)
	}
	// SORRY-level messages are not fatal: re-replaying the boot setup of an
	// image xorriso itself wrote yields "cannot make proposal to mark data file
	// as MBR partition" although the partition is kept; the result is read
	// back and checked either way. No fsync every 16 MiB (-stdio_sync): the
	// output is synced once, when it is put in place.
	args := []string{"-abort_on", "FAILURE", "-return_with", "FAILURE", "32", "-dev", "stdio:" + f.Name(),
		"-stdio_sync", "off", "-boot_image", "any", "replay"}
	for _, m := range maps {
		args = append(args, "-map", m.host, "/"+m.iso)
	}
	args = append(args, "-commit", "-end")
	xw := pipeline.NewLineLogger(c.logger(), "xorriso")
	err = pipeline.RunTool(ctx, exec.Command(xorriso, args...), xw)
	xw.Flush()
	if err != nil {
		return 0, fmt.Errorf("rebuilding %s with xorriso: %w", iso.Path, err)
	}
	if err := clearLegacyHeaders(f.Name()); err != nil {
		return 0, err
	}
	if e.kargs != nil {
		if err := setKargs(f.Name(), *e.kargs); err != nil {
			return 0, fmt.Errorf("setting kernel arguments in the rebuilt ISO: %w", err)
		}
	}
	return checkRebuilt(f.Name(), e)
}

// writeRebuildFiles writes the files a rebuild maps into the image into work:
// the grown embed area holding payload, its igninfo.json, and a kargs.json
// when the karg areas are legacy absolute offsets, which a rebuild moves.
// Returns them in ISO path order, so the xorriso command line is stable.
func writeRebuildFiles(iso *ISO, work string, payload []byte) ([]mapping, error) {
	area := iso.Layout.Ignition
	size := int64(len(payload)) + max(int64(len(payload))/4, rebuildHeadroom)
	size = (size + rebuildAlign - 1) / rebuildAlign * rebuildAlign
	img := make([]byte, size)
	copy(img, payload)
	info, err := json.MarshalIndent(map[string]string{"file": area.File}, "", "  ")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{area.File: img, ignInfoPath: append(info, '\n')}
	if kl := iso.Layout.Kargs; kl != nil && kl.Source == SourceKargsLegacy {
		if files[kargsInfoPath], err = legacyKargsJSON(iso); err != nil {
			return nil, err
		}
	}
	var out []mapping
	for i, isoPath := range slices.Sorted(maps.Keys(files)) {
		// numbered: the area file may share its base name with another
		host := filepath.Join(work, fmt.Sprintf("%d-%s", i, path.Base(isoPath)))
		// 0400: the config area holds the embedded config, secrets and all.
		if err := os.WriteFile(host, files[isoPath], 0o400); err != nil {
			return nil, fmt.Errorf("writing %s for the rebuild: %w", isoPath, err)
		}
		out = append(out, mapping{iso: isoPath, host: host})
	}
	return out, nil
}

// mapping is a host file to put into a rebuilt image at an ISO path.
type mapping struct{ iso, host string }

// checkRebuilt reads the rebuilt image back before it replaces anything: its
// embed area, found as any later reader finds it, must hold exactly the
// payload, then zeros. Comparing the bytes checks as much as decoding them
// would (the payload was encoded from a checked archive) without two xz
// decodes, a fifth of a rebuild's CPU when measured. Returns the area's size.
func checkRebuilt(built string, e edits) (int64, error) {
	check, err := Open(built)
	if err != nil {
		return 0, fmt.Errorf("rebuilt ISO does not read back: %w", err)
	}
	defer check.Close()
	area, err := check.area()
	if err != nil {
		return 0, fmt.Errorf("rebuilt ISO does not read back: %w", err)
	}
	if len(area) < len(e.oversized) || !bytes.Equal(area[:len(e.oversized)], e.oversized) ||
		slices.ContainsFunc(area[len(e.oversized):], func(b byte) bool { return b != 0 }) {
		return 0, fmt.Errorf("rebuilt ISO's embed area (%d bytes at %d) does not hold the %d-byte payload embedded",
			len(area), check.Layout.Ignition.Offset, len(e.oversized))
	}
	return check.Layout.Ignition.Length, nil
}

// legacyKargsJSON turns a coreKarg header into an equivalent kargs.json by
// finding the file that holds each absolute area offset.
func legacyKargsJSON(iso *ISO) ([]byte, error) {
	fs, err := openISOFS(iso.Path, iso.f, iso.size)
	if err != nil {
		return nil, err
	}
	files, err := fs.walk()
	if err != nil {
		return nil, err
	}
	kl := iso.Layout.Kargs
	info := kargsInfo{Default: kl.Default, Size: kl.Size}
	for _, a := range kl.Areas {
		found := false
		for _, f := range files {
			if a.Offset >= f.Offset && a.Offset+int64(kl.Size) <= f.Offset+f.Length {
				pad, end := string([]byte{a.Pad}), string([]byte{a.End})
				info.Files = append(info.Files, kargsInfoFile{Path: f.Path, Offset: a.Offset - f.Offset, Pad: &pad, End: &end})
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: %w: karg area at %d is not inside any file, so it cannot survive a rebuild", iso.Path, ErrUnsupported, a.Offset)
		}
	}
	return json.MarshalIndent(info, "", "  ")
}

// clearLegacyHeaders zeroes coreiso+/coreKarg headers that xorriso replayed
// with the System Area: their absolute offsets are stale after a rebuild.
func clearLegacyHeaders(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := make([]byte, systemAreaSize-legacyKargsHeaderOffset)
	if _, err := f.ReadAt(hdr, legacyKargsHeaderOffset); err != nil {
		return fmt.Errorf("%s: reading the System Area: %w", p, err)
	}
	for _, h := range []struct {
		off   int64
		n     int
		magic string
	}{{legacyKargsHeaderOffset, 72, "coreKarg"}, {legacyIgnHeaderOffset, 24, "coreiso+"}} {
		rel := h.off - legacyKargsHeaderOffset
		if hasPrefix(hdr[rel:], h.magic) {
			if _, err := f.WriteAt(make([]byte, h.n), h.off); err != nil {
				return fmt.Errorf("%s: clearing stale %s header: %w", p, h.magic, err)
			}
		}
	}
	return f.Close()
}
