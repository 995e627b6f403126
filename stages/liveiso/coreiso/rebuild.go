package coreiso

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
)

// rebuildHeadroom is extra room left in a grown embed area, so a later,
// slightly larger config still fits without another rebuild.
const (
	rebuildHeadroom = 256 << 10
	rebuildAlign    = 64 << 10
)

// rebuild writes a copy of iso to out (which may be iso.Path itself) whose
// embed area file is replaced by a larger one holding payload, with
// coreos/igninfo.json rewritten to describe it. The boot configs load the
// area file by path, so the result boots with the config; the El Torito and
// hybrid boot records are replayed by xorriso. When kargs is set, the
// rebuilt image gets those kernel arguments (its karg areas moved with their
// files) before it replaces anything. The result gets c's output mode before
// it is renamed into place; progress goes to c's log. Returns the new area size.
func rebuild(ctx context.Context, iso *ISO, out string, payload []byte, kargs *string, c Customization) (int64, error) {
	log := c.logger()
	area := iso.Layout.Ignition
	if !area.WholeFile || area.File == "" {
		where := "the legacy System Area header"
		if area.File != "" {
			where = fmt.Sprintf("part of %s", area.File)
		}
		return 0, fmt.Errorf("%s: %w: compressed initrd is %d bytes but the embed area (%s) holds %d, and an area that is %s cannot be grown",
			iso.Path, ErrTooLarge, len(payload), area.Source, area.Length, where)
	}
	log.InfoContext(ctx, "Ignition payload exceeds the embed area; rebuilding the ISO",
		"iso", iso.Path, "payload", len(payload), "area", area.Length)
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		return 0, fmt.Errorf("rebuilding the ISO for an oversized config needs xorriso (Debian package xorriso): %w", err)
	}
	work, err := os.MkdirTemp(filepath.Dir(out), ".liveiso-rebuild-*")
	if err != nil {
		return 0, fmt.Errorf("creating rebuild work directory: %w", err)
	}
	defer os.RemoveAll(work)

	size := int64(len(payload)) + max(int64(len(payload))/4, rebuildHeadroom)
	size = (size + rebuildAlign - 1) / rebuildAlign * rebuildAlign
	img := make([]byte, size)
	copy(img, payload)
	imgPath := filepath.Join(work, "ignition.img")
	if err := os.WriteFile(imgPath, img, 0o444); err != nil {
		return 0, fmt.Errorf("writing the new embed area file: %w", err)
	}
	info, err := json.MarshalIndent(map[string]string{"file": area.File}, "", "  ")
	if err != nil {
		return 0, err
	}
	infoPath := filepath.Join(work, "igninfo.json")
	if err := os.WriteFile(infoPath, append(info, '\n'), 0o444); err != nil {
		return 0, fmt.Errorf("writing igninfo.json: %w", err)
	}
	// SORRY-level messages are not fatal: re-replaying the boot setup of an
	// image xorriso itself wrote yields "cannot make proposal to mark data file
	// as MBR partition" although the partition is kept; the result is read
	// back and checked below either way.
	args := []string{"-abort_on", "FAILURE", "-return_with", "FAILURE", "32", "-indev", iso.Path, "-outdev", filepath.Join(work, "out.iso"),
		"-boot_image", "any", "replay",
		"-map", imgPath, "/" + area.File,
		"-map", infoPath, "/" + ignInfoPath}

	// Legacy karg areas are absolute offsets that a rebuild moves; describe
	// them relative to their files in a kargs.json instead.
	if kl := iso.Layout.Kargs; kl != nil && kl.Source == SourceKargsLegacy {
		kj, err := legacyKargsJSON(iso)
		if err != nil {
			return 0, err
		}
		kargsPath := filepath.Join(work, "kargs.json")
		if err := os.WriteFile(kargsPath, kj, 0o444); err != nil {
			return 0, fmt.Errorf("writing kargs.json: %w", err)
		}
		args = append(args, "-map", kargsPath, "/"+kargsInfoPath)
	}
	args = append(args, "-end")

	xw := pipeline.NewLineLogger(log, "xorriso")
	err = pipeline.RunTool(ctx, exec.Command(xorriso, args...), xw)
	xw.Flush()
	if err != nil {
		return 0, fmt.Errorf("rebuilding %s with xorriso: %w", iso.Path, err)
	}
	built := filepath.Join(work, "out.iso")
	if err := clearLegacyHeaders(built); err != nil {
		return 0, err
	}
	// check the result before it replaces anything
	check, err := Open(built)
	if err != nil {
		return 0, fmt.Errorf("rebuilt ISO does not read back: %w", err)
	}
	got, err := check.Ignition()
	newArea := check.Layout.Ignition.Length
	check.Close()
	if err != nil {
		return 0, fmt.Errorf("rebuilt ISO does not read back: %w", err)
	}
	want, _ := ParseInitrd(payload)
	if w, ok := want.Get(IgnitionPath); ok && !bytes.Equal(w, got) {
		return 0, fmt.Errorf("rebuilt ISO returns a different config than embedded")
	}
	if kargs != nil {
		if err := setKargs(ctx, built, *kargs); err != nil {
			return 0, fmt.Errorf("setting kernel arguments in the rebuilt ISO: %w", err)
		}
	}
	if err := os.Chmod(built, c.outMode()); err != nil {
		return 0, err
	}
	if err := os.Rename(built, out); err != nil {
		return 0, fmt.Errorf("moving rebuilt ISO into place: %w", err)
	}
	return newArea, nil
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
