package liveiso

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/fetch"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
)

// isoStore is the depot-wide store of downloaded base ISOs, shared by every build.
const isoStore = "isos"

// baseISO returns the path of the ISO to customize: a local file, an upstream stage's output,
// or a download (named by the options or by an upstream lock) into the depot's ISO store.
func baseISO(ctx context.Context, opts StageOptions, env *pipeline.Env) (string, error) {
	switch {
	case opts.ISOPath != "":
		return opts.ISOPath, nil
	case opts.ISOURL != "":
		return download(ctx, opts.ISOURL, opts.ISOSHA256, env)
	case opts.ISOFrom != "":
		dir, ok := env.Inputs[opts.ISOFrom]
		if !ok {
			return "", fmt.Errorf("live-iso needs the output of stage %q", opts.ISOFrom)
		}
		return filepath.Join(dir, OutputISO), nil
	case opts.ISOLockFrom != "":
		dir, ok := env.Inputs[opts.ISOLockFrom]
		if !ok {
			return "", fmt.Errorf("live-iso needs the output of stage %q", opts.ISOLockFrom)
		}
		l, err := lockfile.ReadLock(filepath.Join(dir, lockfile.File))
		if err != nil {
			return "", fmt.Errorf("the lock of stage %s: %w", opts.ISOLockFrom, err)
		}
		if l.ISO == nil || l.ISO.URL == "" {
			return "", errors.New("the lock pins no live ISO URL: give spec.source in the blueprint")
		}
		if l.ISO.InImage() {
			return extractedISO(ctx, dir, opts.ISOLockFrom, l.ISO, env)
		}
		return download(ctx, l.ISO.URL, l.ISO.SHA256, env)
	}
	return "", errors.New("live-iso needs a base ISO: a local path, a URL, an upstream output or a lock")
}

func download(ctx context.Context, url, sha string, env *pipeline.Env) (string, error) {
	if sha == "" {
		return "", fmt.Errorf("live ISO %s has no sha256 to verify it against", url)
	}
	store, err := env.Shared(isoStore)
	if err != nil {
		return "", err
	}
	env.Log.Info("fetching the base ISO", "url", url, "sha256", sha)
	return fetch.File(ctx, url, sha, store, fetch.Options{Progress: func(done, total int64) {
		env.Progress("download", done, total, "bytes")
	}})
}

// extractedISO returns the ISO the upstream stage extracted from a component image, after
// checking it against the sha256 its lock records. Stage.Files cannot key an upstream
// output; the upstream output's digest is in this stage's key already, and the check makes
// sure the file read is the one the lock pins.
func extractedISO(ctx context.Context, dir, stage string, iso *lockfile.LockedISO, env *pipeline.Env) (string, error) {
	if iso.Path == "" || iso.SHA256 == "" {
		return "", fmt.Errorf("the lock of stage %s pins the live ISO inside an image (%s) but records no extracted file: re-run %s with an output directory", stage, iso.URL, stage)
	}
	// ReadLock keeps Path inside the output; checked again since a path is about to be opened.
	if !filepath.IsLocal(filepath.FromSlash(iso.Path)) {
		return "", fmt.Errorf("the lock of stage %s: iso path %q leaves its output", stage, iso.Path)
	}
	p := filepath.Join(dir, filepath.FromSlash(iso.Path))
	env.Log.Info("verifying the live ISO extracted by "+stage, "image", iso.URL, "sha256", iso.SHA256)
	got, err := fileSHA256(ctx, p, func(done, total int64) { env.Progress("verify", done, total, "bytes") })
	if err != nil {
		return "", fmt.Errorf("the live ISO extracted by stage %s: %w", stage, err)
	}
	if !strings.EqualFold(got, iso.SHA256) {
		return "", fmt.Errorf("the live ISO %s extracted by stage %s has sha256 %s, but its lock pins %s (the output was altered; rebuild it with --force %s): %w",
			p, stage, got, iso.SHA256, stage, coreiso.ErrMalformed)
	}
	return p, nil
}

// fileSHA256 hashes a file, reporting progress and stopping when ctx is done.
func fileSHA256(ctx context.Context, path string, progress func(done, total int64)) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		done += int64(n)
		if n > 0 {
			progress(done, fi.Size())
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
