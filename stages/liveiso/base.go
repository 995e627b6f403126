package liveiso

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/fetch"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
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
		if strings.HasPrefix(l.ISO.URL, "image://") {
			return "", fmt.Errorf("the release ships its live ISO inside an image (%s); extracting it is not supported yet: give spec.source in the blueprint", l.ISO.URL)
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
