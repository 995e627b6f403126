package liveiso

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
)

// Name is the stage name.
const Name = handoff.StageLiveISO

const stageVersion = "2"

// Outputs of the stage, relative to its output directory.
const (
	OutputISO  = "live.iso"
	ReportFile = "liveiso-report.json"
)

// StageOptions is exactly what the live-iso stage reads.
type StageOptions struct {
	// Config is the role of the rendered config to embed (default handoff.ConfigNode).
	Config string `json:"config,omitempty"`
	// ISOPath is a local base ISO; its content is keyed through Stage.Files, its path is not.
	ISOPath string `json:"-"`
	// ISOMissing, when set, says why the local base ISO cannot be read yet (e.g. a make
	// target builds it): the stage fails with it when it runs, while a plan still shows it.
	ISOMissing string `json:"isoMissing,omitempty"`
	// ISOURL and ISOSHA256 name a base ISO to download (http, https or file URL) into the
	// depot's ISO store, verified and resumable (used when ISOPath is empty).
	ISOURL    string `json:"isoURL,omitempty"`
	ISOSHA256 string `json:"isoSHA256,omitempty"`
	// ISOFromResolve takes the base ISO the resolve stage's lock pins (a release's RHCOS
	// ISO) when nothing else names one. An ISO pinned inside an image (image://) is the file
	// resolve extracted, checked against the lock's sha256; any other is downloaded.
	ISOFromResolve bool `json:"isoFromResolve,omitempty"`
	// Kernel-argument edits (see coreiso.KargsEdit).
	KargsAppend  []string `json:"kargsAppend,omitempty"`
	KargsDelete  []string `json:"kargsDelete,omitempty"`
	KargsReplace []string `json:"kargsReplace,omitempty"`
	// NetworkKeyfiles maps keyfile names to host files; contents are keyed through Stage.Files.
	NetworkKeyfiles map[string]string `json:"-"`
	// NetworkNames lists the keyfile names, so renaming one changes the key.
	NetworkNames []string `json:"networkNames,omitempty"`
	// NoRebuild fails on an oversized config instead of rebuilding the ISO.
	NoRebuild bool `json:"noRebuild,omitempty"`
}

// New returns the live-iso stage: it writes live.iso (the base ISO with the
// rendered config, kernel arguments and keyfiles embedded, by patching or, for
// an oversized config, by rebuilding) and liveiso-report.json; its output record
// (handoff.LiveISO) names the ISO.
func New(opts StageOptions) pipeline.Stage {
	if opts.Config == "" {
		opts.Config = handoff.ConfigNode
	}
	opts.NetworkNames = nil
	for name := range opts.NetworkKeyfiles {
		opts.NetworkNames = append(opts.NetworkNames, name)
	}
	sort.Strings(opts.NetworkNames)
	reads := []handoff.Record{handoff.Render{}}
	if opts.ISOPath == "" && opts.ISOURL == "" && opts.ISOFromResolve {
		reads = []handoff.Record{handoff.Render{}, handoff.Resolve{}} // the ISO the release carries
	}
	files := map[string]string{}
	if opts.ISOPath != "" && opts.ISOMissing == "" {
		files["live.iso"] = opts.ISOPath
	}
	for name, p := range opts.NetworkKeyfiles {
		files["network/"+name] = p
	}
	s := pipeline.Stage{
		Name:    Name,
		Version: stageVersion,
		Options: opts,
		// The report says how the run went (its time, what it fetched): not part of the product.
		Reports: []string{ReportFile},
		Deps:    handoff.Deps(reads...),
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return runStage(ctx, opts, env)
		},
	}
	if len(files) > 0 {
		s.Files = files
	}
	return s
}

func runStage(ctx context.Context, opts StageOptions, env *pipeline.Env) error {
	if opts.ISOMissing != "" {
		return errors.New(opts.ISOMissing)
	}
	rendered, err := handoff.Read[handoff.Render](env)
	if err != nil {
		return err
	}
	entry, ok := rendered.Out.Configs[opts.Config]
	if !ok || entry.Path == "" {
		return fmt.Errorf("the render stage produced no %q Ignition config", opts.Config)
	}
	cfg, err := os.ReadFile(rendered.Path(entry.Path))
	if err != nil {
		return fmt.Errorf("reading the rendered config: %w", err)
	}

	base, err := baseISO(ctx, opts, env)
	if err != nil {
		return err
	}
	c := coreiso.Customization{Ignition: cfg, KargsAppend: opts.KargsAppend, KargsDelete: opts.KargsDelete,
		KargsReplace: opts.KargsReplace, NoRebuild: opts.NoRebuild, Log: env.Log}
	if entry.Secret {
		// the config carries secrets (pull secret): so does the ISO
		c.Mode = 0o600
	}
	for name, p := range opts.NetworkKeyfiles {
		b, err := smallfile.Read(p, coreiso.MaxKeyfile)
		if err != nil {
			return fmt.Errorf("reading network keyfile %s: %w", name, err)
		}
		if c.NetworkKeyfiles == nil {
			c.NetworkKeyfiles = map[string][]byte{}
		}
		c.NetworkKeyfiles[name] = b
	}
	out := filepath.Join(env.Out, OutputISO)
	rep, err := coreiso.Customize(ctx, base, out, c)
	if err != nil {
		return err
	}
	if rep.Strategy == coreiso.StrategyRebuild {
		if v, err := exec.CommandContext(ctx, "xorriso", "-version").Output(); err == nil {
			env.UseTool("xorriso", strings.TrimSpace(strings.SplitN(string(v), "\n", 2)[0]))
		}
	}
	env.Log.Info("live ISO customized", "strategy", rep.Strategy, "config_bytes", rep.ConfigBytes,
		"payload_bytes", rep.PayloadBytes, "area_bytes", rep.AreaBytes, "kargs", rep.Kargs)
	rep.Output = OutputISO // relative: the cache entry moves
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.Out, ReportFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return handoff.Write(env, handoff.LiveISO{ISO: OutputISO, Secret: entry.Secret})
}
