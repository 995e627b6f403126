package precache

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"
)

// Name is the stage name.
const Name = handoff.StagePrecache

const version = "2"

// Outputs of the stage, relative to its output directory.
const (
	LayoutDir  = "layout"
	DiskFile   = "precache.tar"
	ReportFile = "precache-report.json"
)

// agentFile labels the agent among the stage's key files.
const agentFile = "agent"

// SharedStore is the name of the depot-wide content store (env.Shared); the live ISO
// downloads use the same one.
const SharedStore = blobstore.SharedName

// Options is exactly what the stage reads.
type Options struct {
	// Arch is the node architecture in CoreOS naming (default x86_64); it picks the instance
	// of multi-arch images.
	Arch string `json:"arch,omitempty"`
	// Registry says how registries are reached.
	Registry registries.Config `json:"registry"`
	// Disk packages the layout as a raw tar data disk for the factory VM (default true).
	Disk *bool `json:"disk,omitempty"`
	// Agent is the node agent binary put on the data disk (precachedisk.AgentEntry), for a
	// node whose OS does not carry it (OpenShift); "" for none. Its content is part of the
	// key (Stage.Files), its path is not.
	Agent string `json:"-"`
	// Jobs is the number of parallel blob transfers (default 6). It does not change the
	// output, so it is not part of the key.
	Jobs int `json:"-"`
	// Attempts per source on transient errors (default: netlimit.DefaultPolicy's); not part
	// of the key.
	Attempts int `json:"-"`
	// RetryBase is the first backoff delay (default: netlimit.DefaultPolicy's); not part of
	// the key.
	RetryBase time.Duration `json:"-"`
}

// ReadImages lists the images of a lock.json, one per distinct pinned reference.
func ReadImages(path string) ([]Image, error) {
	l, err := lockfile.ReadLock(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Image
	for _, im := range l.Images {
		if seen[im.Ref] {
			continue
		}
		seen[im.Ref] = true
		out = append(out, Image{Name: im.Name, Ref: im.Ref, Digest: im.Digest})
	}
	return out, nil
}

// New returns the precache stage. Its output holds the OCI layout (blobs hardlinked from the
// depot's shared store), the data disk and precache-report.json; its output record
// (handoff.Precache) names the layout, the disk and the images.
func New(opts Options) pipeline.Stage {
	s := pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		// The report says how the run went (its time, what it fetched): not part of the product.
		Reports: []string{ReportFile},
		Deps:    handoff.Deps(handoff.Resolve{}),
		Run: func(ctx context.Context, env *pipeline.Env) error {
			env.UseTool("containers/image", versions.Module("github.com/containers/image/v5"))
			return run(ctx, opts, env)
		},
	}
	files := opts.Registry.Files()
	if opts.Agent != "" {
		if files == nil {
			files = map[string]string{}
		}
		files[agentFile] = opts.Agent
	}
	if len(files) > 0 {
		s.Files = files
	}
	s.Secrets = opts.Registry.Secrets()
	return s
}

// StageReport is precache-report.json.
type StageReport struct {
	Report
	Layout    LayoutStats `json:"layout"`
	DiskBytes int64       `json:"diskBytes,omitempty"`
}

func run(ctx context.Context, opts Options, env *pipeline.Env) error {
	in, err := handoff.Read[handoff.Resolve](env)
	if err != nil {
		return err
	}
	images, err := ReadImages(in.Path(in.Out.Lock))
	if err != nil {
		return err
	}
	shared, err := env.Shared(SharedStore)
	if err != nil {
		return err
	}
	st, err := blobstore.Open(shared)
	if err != nil {
		return err
	}
	arch := opts.Arch
	if arch == "" {
		arch = "x86_64"
	}
	sys, err := registries.SystemContext(ctx, env.Scratch, opts.Registry, env.Secrets, arch, env)
	if err != nil {
		return err
	}
	res, err := Precache(ctx, Config{
		Images:    images,
		Store:     st,
		Sys:       sys,
		Jobs:      opts.Jobs,
		Attempts:  opts.Attempts,
		RetryBase: opts.RetryBase,
		Arch:      registries.GoArch(arch),
		Progress:  env.Progress,
		Log:       env.Log,
	})
	if err != nil {
		return err
	}
	rep := StageReport{Report: res.Report}
	if rep.Layout, err = res.WriteLayout(filepath.Join(env.Out, LayoutDir), st); err != nil {
		return err
	}
	if opts.Agent != "" {
		if err := precachedisk.AddAgent(filepath.Join(env.Out, LayoutDir), opts.Agent); err != nil {
			return err
		}
	}
	if opts.Disk == nil || *opts.Disk {
		rep.DiskBytes, err = precachedisk.Write(ctx, filepath.Join(env.Out, LayoutDir), filepath.Join(env.Out, DiskFile), func(done, total int64) {
			env.Progress("data disk", done, total, "bytes")
		})
		if err != nil {
			return err
		}
	}
	env.Log.Info("precache done", "images", rep.Images, "blobs", rep.Blobs, "blobs_fetched", rep.BlobsFetched,
		"bytes_fetched", rep.BytesFetched, "bytes_reused", rep.BytesReused, "retries", rep.Retries,
		"layout_bytes_copied", rep.Layout.BytesCopied, "disk_bytes", rep.DiskBytes)
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.Out, ReportFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	// run.json (and a depot's report) show what the build fetched.
	if err := env.Summarize(map[string]int64{"images": int64(rep.Images), "bytesFetched": rep.BytesFetched, "bytesReused": rep.BytesReused}); err != nil {
		return err
	}
	return handoff.Write(env, record(images, opts.Disk == nil || *opts.Disk))
}

// record is the stage's output record.
func record(images []Image, disk bool) handoff.Precache {
	rec := handoff.Precache{Layout: LayoutDir}
	if disk {
		rec.DataDisk = DiskFile
	}
	for _, im := range images {
		rec.Images = append(rec.Images, handoff.Image{Name: im.Name, Ref: im.Ref, Digest: im.Digest})
	}
	return rec
}
