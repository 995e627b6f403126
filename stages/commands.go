package stages

import (
	"context"
	"log/slog"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/stages/render"
	"github.com/snofactory/snofactory/stages/resolve"
)

// Lock resolves everything the blueprint reads to digests, as the resolve stage does but
// without the cache, and writes the lock to path (snofactory lock), which may not be one of
// inputs (pipeline/output). It returns how many images it pinned.
func Lock(ctx context.Context, bp *v1alpha1.Blueprint, path string, log *slog.Logger, inputs ...string) (int, error) {
	in := mapBlueprint(bp)
	lock, err := resolve.Pin(ctx, in.resolve, Secrets(bp), log)
	if err != nil {
		return 0, err
	}
	return len(lock.Images), resolve.WriteLock(path, lock, inputs...)
}

// Render renders the blueprint's Ignition configs and manifests into outDir, outside a build
// (snofactory render): openshift-install comes from PATH, not from a resolve output.
func Render(ctx context.Context, bp *v1alpha1.Blueprint, outDir string, log *slog.Logger) error {
	return render.Render(ctx, mapBlueprint(bp).render, Secrets(bp), outDir, log)
}
