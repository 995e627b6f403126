package coreiso

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/output"
)

// rebuildHeadroom is extra room left in a grown embed area, so a later,
// slightly larger config still fits without another rebuild.
const (
	rebuildHeadroom = 256 << 10
	rebuildAlign    = 64 << 10
)

// rebuild embeds e.oversized by rebuilding iso around a larger embed area
// file, with coreos/igninfo.json rewritten to describe it (and e.kargs set in
// the result). The boot configs load the area file by path, so the result
// boots with the config; the El Torito and hybrid boot records are replayed
// by xorriso. The image is built and checked beside its destination, then
// written into dst when changing the ISO in place (keeping the file the user
// named), else renamed to out with c's output mode. Returns the new area size.
func rebuild(ctx context.Context, iso *ISO, dst *os.File, out string, e edits, c Customization) (int64, error) {
	if err := checkGrowable(iso, len(e.oversized)); err != nil {
		return 0, err
	}
	c.logger().InfoContext(ctx, "Ignition payload exceeds the embed area; rebuilding the ISO",
		"iso", iso.Path, "payload", len(e.oversized), "area", iso.Layout.Ignition.Length)
	dir := filepath.Dir(out)
	if dst != nil {
		// beside the file a symlink points at: its file system has room for it
		target, err := filepath.EvalSymlinks(iso.Path)
		if err != nil {
			return 0, err
		}
		dir = filepath.Dir(target)
	}
	work, err := os.MkdirTemp(dir, ".liveiso-rebuild-*")
	if err != nil {
		return 0, fmt.Errorf("creating rebuild work directory: %w", err)
	}
	defer os.RemoveAll(work)
	built, err := buildRebuilt(ctx, iso, work, e, c.logger())
	if err != nil {
		return 0, err
	}
	newArea, err := checkRebuilt(built, e)
	if err != nil {
		return 0, err
	}
	if dst != nil {
		return newArea, overwrite(ctx, dst, built)
	}
	if err := output.Place(built, out, c.outMode()); err != nil {
		return 0, fmt.Errorf("moving the rebuilt ISO into place: %w", err)
	}
	return newArea, nil
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

// buildRebuilt runs xorriso to write work/out.iso: iso with the new embed area
// file, igninfo.json (and, for legacy karg areas, kargs.json) mapped in, and
// stale legacy headers cleared. Returns its path.
func buildRebuilt(ctx context.Context, iso *ISO, work string, e edits, log *slog.Logger) (string, error) {
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		return "", fmt.Errorf("rebuilding the ISO for an oversized config needs xorriso (Debian package xorriso): %w", err)
	}
	maps, err := writeRebuildFiles(iso, work, e.oversized)
	if err != nil {
		return "", err
	}
	built := filepath.Join(work, "out.iso")
	// Created 0600 before xorriso fills it: it carries the embedded config.
	if err := os.WriteFile(built, nil, 0o600); err != nil {
		return "", err
	}
	// SORRY-level messages are not fatal: re-replaying the boot setup of an
	// image xorriso itself wrote yields "cannot make proposal to mark data file
	// as MBR partition" although the partition is kept; the result is read
	// back and checked either way.
	args := []string{"-abort_on", "FAILURE", "-return_with", "FAILURE", "32", "-indev", iso.Path, "-outdev", built,
		"-boot_image", "any", "replay"}
	for _, m := range maps {
		args = append(args, "-map", m.host, "/"+m.iso)
	}
	args = append(args, "-end")
	xw := pipeline.NewLineLogger(log, "xorriso")
	err = pipeline.RunTool(ctx, exec.Command(xorriso, args...), xw)
	xw.Flush()
	if err != nil {
		return "", fmt.Errorf("rebuilding %s with xorriso: %w", iso.Path, err)
	}
	if err := clearLegacyHeaders(built); err != nil {
		return "", err
	}
	if e.kargs != nil {
		if err := setKargs(built, *e.kargs); err != nil {
			return "", fmt.Errorf("setting kernel arguments in the rebuilt ISO: %w", err)
		}
	}
	return built, nil
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

// checkRebuilt reads the rebuilt image back before it replaces anything:
// it must return the embedded config. Returns its embed area size.
func checkRebuilt(built string, e edits) (int64, error) {
	check, err := Open(built)
	if err != nil {
		return 0, fmt.Errorf("rebuilt ISO does not read back: %w", err)
	}
	defer check.Close()
	got, err := check.Ignition()
	if err != nil {
		return 0, fmt.Errorf("rebuilt ISO does not read back: %w", err)
	}
	want, _ := ParseInitrd(e.oversized)
	if w, ok := want.Get(IgnitionPath); ok && !bytes.Equal(w, got) {
		return 0, fmt.Errorf("rebuilt ISO returns a different config than embedded")
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
