package liveiso

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/pipeline/fetch"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
)

// isoStore is the depot-wide content store base ISOs are downloaded into, shared by every
// build and with the precache stage's image blobs.
const isoStore = blobstore.SharedName

// baseISO returns the path of the ISO to customize: a local file, an upstream stage's output,
// or a download (named by the options or by an upstream lock) into the depot's ISO store.
func baseISO(ctx context.Context, opts StageOptions, env *pipeline.Env) (string, error) {
	switch {
	case opts.ISOPath != "":
		return opts.ISOPath, nil
	case opts.ISOURL != "":
		return download(ctx, opts.ISOURL, opts.ISOSHA256, env)
	case opts.ISOFromResolve:
		return lockedISO(ctx, env)
	}
	return "", errors.New("live-iso needs a base ISO: a local path, a URL, an upstream output or a lock")
}

// lockedISO returns the ISO the resolve stage's lock pins: the file resolve extracted from
// an image, or a download.
func lockedISO(ctx context.Context, env *pipeline.Env) (string, error) {
	in, err := handoff.Read[handoff.Resolve](env)
	if err != nil {
		return "", err
	}
	l, err := lockfile.ReadLock(in.Path(in.Out.Lock))
	if err != nil {
		return "", fmt.Errorf("the lock of stage %s: %w", in.Stage, err)
	}
	if l.ISO == nil || l.ISO.URL == "" {
		return "", errors.New("the lock pins no live ISO URL: give spec.source in the blueprint")
	}
	if !l.ISO.InImage() {
		return download(ctx, l.ISO.URL, l.ISO.SHA256, env)
	}
	if in.Out.ISO == "" || l.ISO.SHA256 == "" {
		return "", fmt.Errorf("the lock of stage %s pins the live ISO inside an image (%s) but records no extracted file: re-run %s with an output directory", in.Stage, l.ISO.URL, in.Stage)
	}
	return verifiedISO(ctx, in.Path(in.Out.ISO), in.Stage, l.ISO.SHA256, env)
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

// verifiedISO returns the ISO the resolve stage extracted from a component image, after
// checking it against the sha256 its lock records. Stage.Files cannot key an upstream
// output; the upstream output's digest is in this stage's key already, and the check makes
// sure the file read is the one the lock pins.
func verifiedISO(ctx context.Context, p, stage, sha string, env *pipeline.Env) (string, error) {
	env.Log.Info("verifying the live ISO extracted by "+stage, "sha256", sha)
	got, err := fileSHA256(ctx, p, func(done, total int64) { env.Progress("verify", done, total, "bytes") })
	if err != nil {
		return "", fmt.Errorf("the live ISO extracted by stage %s: %w", stage, err)
	}
	if !strings.EqualFold(got, sha) {
		return "", fmt.Errorf("the live ISO %s extracted by stage %s has sha256 %s, but its lock pins %s (the output was altered; rebuild it with --force %s): %w",
			p, stage, got, sha, stage, coreiso.ErrMalformed)
	}
	return p, nil
}

// fileSHA256 hashes a file, reporting progress and stopping when ctx is done.
func fileSHA256(ctx context.Context, path string, progress func(done, total int64)) (string, error) {
	f, err := smallfile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
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
