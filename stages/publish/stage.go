package publish

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/ociseed"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// Name is the stage name.
const Name = handoff.StagePublish

const version = "1"

// ReportFile lists where the seed went.
const ReportFile = "publish.json"

// Artifact types of the referrers attached to a seed.
const (
	ArtifactValidation = "application/vnd.snofactory.validation.report.v1+json"
	ArtifactRunRecord  = "application/vnd.snofactory.run.record.v1+json"
)

// Options is exactly what the stage reads.
type Options struct {
	// Push is the registry reference (with a tag) to push to; "" for none.
	Push string `json:"push,omitempty"`
	// OCILayout is a directory to write an OCI image layout into; "" for none.
	OCILayout string `json:"ociLayout,omitempty"`
	// ChunkSize and Jobs tune the transfer, not the result.
	ChunkSize int64 `json:"-"`
	Jobs      int   `json:"-"`
}

// New returns the publish stage.
func New(opts Options) pipeline.Stage {
	return pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		Deps:    handoff.Deps(handoff.Validate{}, handoff.Seal{}),
		// The push's effect lives in the registry, not the cache: it runs every time, and
		// sends nothing the registry already has.
		Uncached: true,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return run(ctx, opts, env)
		},
	}
}

// Report is publish.json: each place the seed went and its manifest digest there.
type Report struct {
	Published []ociseed.Result `json:"published"`
}

func run(ctx context.Context, opts Options, env *pipeline.Env) error {
	sl, err := handoff.Read[handoff.Seal](env)
	if err != nil {
		return err
	}
	vd, err := handoff.Read[handoff.Validate](env)
	if err != nil {
		return err
	}
	refs := []ociseed.Referrer{{File: vd.Path(vd.Out.Report), ArtifactType: ArtifactValidation}}
	if rec := filepath.Join(env.RunDir, pipeline.RecordFile); fileExists(rec) {
		refs = append(refs, ociseed.Referrer{File: rec, ArtifactType: ArtifactRunRecord})
	}
	var rep Report
	for _, dest := range destinations(opts) {
		env.Log.Info("publishing the seed", "to", dest)
		o := []ociseed.Option{ociseed.WithLogger(env.Log), ociseed.WithReferrers(refs...)}
		if opts.ChunkSize > 0 {
			o = append(o, ociseed.WithChunkSize(opts.ChunkSize))
		}
		if opts.Jobs > 0 {
			o = append(o, ociseed.WithJobs(opts.Jobs))
		}
		res, err := ociseed.Push(ctx, sl.Path(sl.Out.Dir), dest, o...)
		if err != nil {
			return err
		}
		env.Log.Info("seed published", "to", res.Location, "digest", res.Digest.String(), "bytes_sent", res.Sent)
		rep.Published = append(rep.Published, *res)
	}
	if len(rep.Published) == 0 {
		env.Log.Info("nothing to publish: the blueprint names no spec.outputs.push or ociLayout")
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.Out, ReportFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return env.Summarize(rep)
}

// destinations are the places to push to, in ociseed's location syntax.
func destinations(opts Options) []string {
	var out []string
	if opts.Push != "" {
		out = append(out, opts.Push)
	}
	if opts.OCILayout != "" {
		out = append(out, ociseed.TransportLayout+":"+opts.OCILayout)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
