package liveiso

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
)

// Name is the stage name.
const Name = "live-iso"

const stageVersion = "1"

// Outputs of the stage, relative to its output directory.
const (
	OutputISO  = "live.iso"
	ReportFile = "liveiso-report.json"
)

// StageOptions is exactly what the live-iso stage reads.
type StageOptions struct {
	// ConfigFrom is the stage whose output holds render.json (default "render").
	ConfigFrom string `json:"configFrom,omitempty"`
	// ConfigName is the entry of render.json's "ignition" map to embed (default "config").
	ConfigName string `json:"configName,omitempty"`
	// ISOPath is a local base ISO; its content is keyed through Stage.Files, its path is not.
	ISOPath string `json:"-"`
	// ISOFrom is an upstream stage whose output holds the base ISO as live.iso
	// (used when ISOPath is empty).
	ISOFrom string `json:"isoFrom,omitempty"`
	// ISOURL and ISOSHA256 name a base ISO to download (http, https or file URL) into the
	// depot's ISO store, verified and resumable (used when ISOPath and ISOFrom are empty).
	ISOURL    string `json:"isoURL,omitempty"`
	ISOSHA256 string `json:"isoSHA256,omitempty"`
	// ISOLockFrom is an upstream stage whose lock.json pins the base ISO (the resolve stage,
	// for a release's RHCOS ISO); used when nothing else names the ISO. An ISO the lock pins
	// inside an image (image://) is the file the upstream stage extracted (lock iso.path),
	// checked against the lock's sha256; any other is downloaded.
	ISOLockFrom string `json:"isoLockFrom,omitempty"`
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
// an oversized config, by rebuilding) and liveiso-report.json.
func New(opts StageOptions) pipeline.Stage {
	if opts.ConfigFrom == "" {
		opts.ConfigFrom = "render"
	}
	if opts.ConfigName == "" {
		opts.ConfigName = "config"
	}
	opts.NetworkNames = nil
	for name := range opts.NetworkKeyfiles {
		opts.NetworkNames = append(opts.NetworkNames, name)
	}
	sort.Strings(opts.NetworkNames)
	deps := []string{opts.ConfigFrom}
	switch {
	case opts.ISOPath != "" || opts.ISOURL != "":
	case opts.ISOFrom != "":
		deps = append(deps, opts.ISOFrom)
	case opts.ISOLockFrom != "":
		deps = append(deps, opts.ISOLockFrom)
	}
	files := map[string]string{}
	if opts.ISOPath != "" {
		files["live.iso"] = opts.ISOPath
	}
	for name, p := range opts.NetworkKeyfiles {
		files["network/"+name] = p
	}
	s := pipeline.Stage{
		Name:    Name,
		Version: stageVersion,
		Options: opts,
		Deps:    deps,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return runStage(ctx, opts, env)
		},
	}
	if len(files) > 0 {
		s.Files = files
	}
	return s
}

// renderReport is the part of the render stage's render.json this stage
// reads; the schema belongs to render.
type renderReport struct {
	Ignition map[string]struct {
		Path   string `json:"path"`
		Secret bool   `json:"secret"`
	} `json:"ignition"`
}

func runStage(ctx context.Context, opts StageOptions, env *pipeline.Env) error {
	renderDir, ok := env.Inputs[opts.ConfigFrom]
	if !ok {
		return fmt.Errorf("live-iso needs the output of stage %q", opts.ConfigFrom)
	}
	raw, err := os.ReadFile(filepath.Join(renderDir, "render.json"))
	if err != nil {
		return fmt.Errorf("reading render.json: %w", err)
	}
	var rr renderReport
	if err := json.Unmarshal(raw, &rr); err != nil {
		return fmt.Errorf("render.json: %w", err)
	}
	entry, ok := rr.Ignition[opts.ConfigName]
	if !ok || entry.Path == "" {
		return fmt.Errorf("render.json has no Ignition config %q", opts.ConfigName)
	}
	if filepath.IsAbs(entry.Path) || strings.HasPrefix(filepath.Clean(filepath.FromSlash(entry.Path)), "..") {
		return fmt.Errorf("render.json: config path %q leaves the render output", entry.Path)
	}
	cfg, err := os.ReadFile(filepath.Join(renderDir, filepath.FromSlash(entry.Path)))
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
		b, err := os.ReadFile(p)
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
	return os.WriteFile(filepath.Join(env.Out, ReportFile), append(b, '\n'), 0o644)
}
