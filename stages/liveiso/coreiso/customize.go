package coreiso

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/pipeline/output"
)

// Strategy says how a customization reached the ISO.
type Strategy string

const (
	// StrategyPatch: only the embed and karg areas were rewritten (the normal case).
	StrategyPatch Strategy = "embed"
	// StrategyRebuild: the config did not fit, so the ISO was rebuilt with a
	// larger images/ignition.img and an updated coreos/igninfo.json.
	StrategyRebuild Strategy = "rebuild"
)

// Customization is what to change in a live ISO. Zero fields change nothing.
type Customization struct {
	// Ignition is the config to embed as /config.ign in the live initramfs.
	Ignition []byte
	// Kernel-argument edits; see KargsEdit for the syntax. Replace takes KEY=OLD=NEW.
	KargsAppend, KargsDelete []string
	KargsReplace             []string
	// NetworkKeyfiles are NetworkManager keyfiles by file name (e.g. "eth0.nmconnection"),
	// placed under etc/coreos-firstboot-network/; they replace any already embedded.
	NetworkKeyfiles map[string][]byte
	// Force replaces an already embedded config.
	Force bool

	// RemoveIgnition removes the embedded config (the area is zeroed when nothing remains).
	RemoveIgnition bool
	// RemoveNetwork removes embedded network keyfiles.
	RemoveNetwork bool
	// ResetKargs restores the default kernel arguments before any edits.
	ResetKargs bool
	// NoRebuild makes an oversized config an error instead of rebuilding the ISO.
	NoRebuild bool

	// Mode is the permission of a new output ISO (0 means 0644), set before it
	// appears under its name: an ISO carrying secrets must never be readable
	// by others, not even for a moment. An ISO changed in place keeps its mode.
	Mode os.FileMode
	// Log receives progress messages (nil discards them); a stage passes its
	// own log so nothing reaches stderr behind the progress display.
	Log *slog.Logger
}

// outMode is the permission a new output ISO gets: 0600 unless the caller says otherwise,
// since a live ISO's embedded config (this one, or one it already had) usually holds the
// pull secret.
func (c Customization) outMode() os.FileMode {
	if c.Mode == 0 {
		return 0o600
	}
	return c.Mode.Perm()
}

// logger is c.Log, or a logger that drops everything.
func (c Customization) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func (c Customization) kargsEdit() KargsEdit {
	return KargsEdit{Append: c.KargsAppend, Delete: c.KargsDelete, Replace: c.KargsReplace}
}

func (c Customization) touchesInitrd() bool {
	return c.Ignition != nil || len(c.NetworkKeyfiles) > 0 || c.RemoveIgnition || c.RemoveNetwork
}

func (c Customization) touchesKargs() bool { return c.ResetKargs || !c.kargsEdit().Empty() }

// Report says what Customize did.
type Report struct {
	Strategy Strategy `json:"strategy"`
	Output   string   `json:"output"`
	InPlace  bool     `json:"inPlace"`
	// ConfigBytes is the raw config size; PayloadBytes the compressed initrd.
	ConfigBytes  int `json:"configBytes"`
	PayloadBytes int `json:"payloadBytes"`
	// AreaBytes is the embed area size of the result; OriginalAreaBytes that of the input.
	AreaBytes         int64  `json:"areaBytes"`
	OriginalAreaBytes int64  `json:"originalAreaBytes"`
	AreaSource        string `json:"areaSource"`
	// Kargs are the resulting kernel arguments ("" when the ISO has no karg areas).
	Kargs        string        `json:"kargs,omitempty"`
	KargsChanged bool          `json:"kargsChanged"`
	NetworkFiles int           `json:"networkFiles"`
	PatchedBytes int64         `json:"patchedBytes"`
	Duration     time.Duration `json:"duration"`
}

// edits is what a customization writes: patches for the embed and karg
// areas, or a payload too large for the embed area that needs a rebuild.
type edits struct {
	patches   []patch
	oversized []byte
	// kargs are the new kernel arguments, nil when they are not touched.
	kargs *string
}

// Customize applies c to the live ISO inISO, writing to outISO, or changing
// inISO in place when outISO is "". A config whose compressed initrd does not
// fit the embed area is embedded by rebuilding the ISO around a larger
// images/ignition.img (unless c.NoRebuild); the Report says which happened.
// In place means the file inISO names on both paths: through a symlink, in
// the same inode, refused if it is not writable, keeping its mode and owner.
func Customize(ctx context.Context, inISO, outISO string, c Customization) (Report, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	iso, err := Open(inISO)
	if err != nil {
		return Report{}, err
	}
	defer iso.Close()
	rep := Report{Strategy: StrategyPatch, Output: outISO, InPlace: outISO == "",
		OriginalAreaBytes: iso.Layout.Ignition.Length, AreaBytes: iso.Layout.Ignition.Length,
		AreaSource: iso.Layout.Ignition.Source, ConfigBytes: len(c.Ignition)}
	if rep.InPlace {
		rep.Output = inISO
		err = changeInPlace(ctx, iso, c, &rep)
	} else {
		err = writeNew(ctx, iso, outISO, c, &rep)
	}
	rep.Duration = time.Since(start)
	return rep, err
}

// changeInPlace applies c to iso, in the file it was opened from.
func changeInPlace(ctx context.Context, iso *ISO, c Customization, rep *Report) error {
	dst, err := openInPlace(iso.Path)
	if err != nil {
		return err
	}
	defer dst.Close()
	e, err := planEdits(iso, c, rep)
	if err != nil {
		return err
	}
	if e.oversized == nil {
		rep.PatchedBytes, err = applyPatches(dst, e.patches)
	} else {
		err = rep.rebuilt(rebuildInto(ctx, iso, dst, e, c))
	}
	if err != nil {
		return err
	}
	return dst.Close()
}

// writeNew applies c to a copy of iso written to out (output.Write: a file
// appears atomically under its final name, already with c's mode; a block
// device is written in place). The edits are planned while the image is
// copied: encoding a large config costs as much as copying a tenth of it.
func writeNew(ctx context.Context, iso *ISO, out string, c Customization, rep *Report) error {
	return output.Write(out, c.outMode(), func(f *os.File) error {
		e, err := planWhileCopying(ctx, iso, f, c, rep)
		switch {
		case err != nil:
			return err
		case e.oversized == nil:
			rep.PatchedBytes, err = applyPatches(f, e.patches)
			return err
		case !isRegular(f):
			// a device cannot be read back by Open, which takes regular files only
			return rep.rebuilt(rebuildInto(ctx, iso, f, e, c))
		default:
			return rep.rebuilt(grow(ctx, iso, f, e, c))
		}
	}, iso.Path)
}

// isRegular tells a regular file from the block device output.Write hands a fill.
func isRegular(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular()
}

// planWhileCopying copies iso into f while it plans the edits c makes.
func planWhileCopying(ctx context.Context, iso *ISO, f *os.File, c Customization, rep *Report) (edits, error) {
	var e edits
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := copyInto(gctx, f, iso.f, iso.size); err != nil {
			return fmt.Errorf("copying %s to %s: %w", iso.Path, f.Name(), err)
		}
		return nil
	})
	g.Go(func() (err error) {
		e, err = planEdits(iso, c, rep)
		return err
	})
	return e, g.Wait()
}

// rebuilt records a rebuild's strategy and new area size in rep.
func (rep *Report) rebuilt(area int64, err error) error {
	rep.Strategy = StrategyRebuild
	if err == nil {
		rep.AreaBytes, rep.PatchedBytes = area, area
	}
	return err
}

// planEdits works out what c writes into iso, filling in rep's payload and
// kernel-argument fields.
func planEdits(iso *ISO, c Customization, rep *Report) (edits, error) {
	var e edits
	if c.touchesInitrd() {
		payload, nfiles, err := buildPayload(iso, c)
		if err != nil {
			return e, err
		}
		rep.PayloadBytes, rep.NetworkFiles = len(payload), nfiles
		if int64(len(payload)) > iso.Layout.Ignition.Length {
			if c.NoRebuild {
				return e, fmt.Errorf("%s: %w: compressed initrd is %d bytes, the area holds %d (rebuilding was disabled)",
					iso.Path, ErrTooLarge, len(payload), iso.Layout.Ignition.Length)
			}
			if err := checkGrowable(iso, len(payload)); err != nil {
				return e, err
			}
			e.oversized = payload
		} else {
			area := make([]byte, iso.Layout.Ignition.Length)
			copy(area, payload)
			e.patches = append(e.patches, patch{iso.Layout.Ignition.Offset, area})
		}
	}
	if !c.touchesKargs() {
		if iso.Layout.Kargs != nil {
			rep.Kargs, _ = iso.Kargs()
		}
		return e, checkPatches(iso, e.patches)
	}
	cur, next, err := editKargs(iso, c)
	if err != nil {
		return e, err
	}
	kp, err := kargsPatches(iso.Layout.Kargs, next)
	if err != nil {
		return e, fmt.Errorf("%s: %w", iso.Path, err)
	}
	e.patches, e.kargs = append(e.patches, kp...), &next
	rep.Kargs, rep.KargsChanged = next, next != cur
	return e, checkPatches(iso, e.patches)
}

// editKargs returns the ISO's current kernel arguments and those c makes of them.
func editKargs(iso *ISO, c Customization) (cur, next string, err error) {
	if iso.Layout.Kargs == nil {
		return "", "", fmt.Errorf("%s: %w; kernel arguments cannot be changed", iso.Path, ErrNoKargsArea)
	}
	if cur, err = iso.Kargs(); err != nil {
		return "", "", err
	}
	base := cur
	if c.ResetKargs {
		base = iso.Layout.Kargs.Default
	}
	next, err = c.kargsEdit().Apply(base)
	return cur, next, err
}

// buildPayload computes the new compressed initrd for the embed area.
func buildPayload(iso *ISO, c Customization) ([]byte, int, error) {
	in, err := iso.Initrd()
	if err != nil {
		return nil, 0, err
	}
	if c.Ignition != nil {
		if _, exists := in.Get(IgnitionPath); exists && !c.Force {
			return nil, 0, fmt.Errorf("%s: %w", iso.Path, ErrAlreadyEmbedded)
		}
		if !json.Valid(c.Ignition) {
			return nil, 0, fmt.Errorf("%w: the Ignition config is not valid JSON", ErrInvalidInput)
		}
		in.Set(IgnitionPath, 0o600, c.Ignition)
	} else if c.RemoveIgnition {
		in.Remove(IgnitionPath)
	}
	if c.RemoveNetwork || len(c.NetworkKeyfiles) > 0 {
		for _, p := range in.filesUnder(NetworkDir) {
			in.Remove(p)
		}
	}
	if len(c.NetworkKeyfiles) > 0 {
		if !iso.Layout.LiveInitrdNetwork() {
			return nil, 0, fmt.Errorf("%s: %w: its /coreos/features.json does not list live-initrd-network, so its initramfs ignores embedded NetworkManager keyfiles",
				iso.Path, ErrUnsupported)
		}
		for name, data := range c.NetworkKeyfiles {
			if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
				return nil, 0, fmt.Errorf("%w: network keyfile name %q must be a plain file name", ErrInvalidInput, name)
			}
			in.Set(path.Join(NetworkDir, name), 0o600, data)
		}
	}
	payload, err := in.Encode()
	if err != nil {
		return nil, 0, fmt.Errorf("encoding the embed initrd: %w", err)
	}
	return payload, len(in.filesUnder(NetworkDir)), nil
}

func kargsPatches(kl *KargsLayout, args string) ([]patch, error) {
	var out []patch
	for _, a := range kl.Areas {
		b, err := encodeKargsArea(args, kl.Size, a.Pad, a.End)
		if err != nil {
			return nil, err
		}
		out = append(out, patch{a.Offset, b})
	}
	return out, nil
}

// setKargs writes args into every karg area of the ISO at p, in place.
func setKargs(p, args string) error {
	iso, err := Open(p)
	if err != nil {
		return err
	}
	defer iso.Close()
	if iso.Layout.Kargs == nil {
		return fmt.Errorf("%s: %w", p, ErrNoKargsArea)
	}
	kp, err := kargsPatches(iso.Layout.Kargs, args)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if err := checkPatches(iso, kp); err != nil {
		return err
	}
	f, err := openInPlace(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := applyPatches(f, kp); err != nil {
		return err
	}
	return f.Close()
}
