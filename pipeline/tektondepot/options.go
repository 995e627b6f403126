package tektondepot

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/depot"
)

// Options are depot run --tekton's flags.
type Options struct {
	On                                      bool
	Kubeconfig, Namespace, Claim, SourceDir string
	PushSecret, SigningSecret, Image        string
}

// Register adds --tekton and its flags to depot run's.
func (o *Options) Register(fl *pflag.FlagSet) {
	fl.BoolVar(&o.On, "tekton", false, "run each build as a PipelineRun of the snofactory Pipeline on a cluster (see docs/depot.md)")
	for _, s := range []struct {
		v          *string
		name, help string
	}{
		{&o.Kubeconfig, "kubeconfig", "with --tekton: the cluster's kubeconfig (default $KUBECONFIG, else ~/.kube/config)"},
		{&o.Namespace, "namespace", "with --tekton: the namespace (default the kubeconfig context's)"},
		{&o.Claim, "claim", "with --tekton: the PersistentVolumeClaim whose subPaths source, cache and output the builds bind (default " + DefaultClaim + ")"},
		{&o.SourceDir, "source-dir", "with --tekton: the local copy of what the claim's source subPath holds (default the depot file's directory)"},
		{&o.Image, "image", "with --tekton: the snofactory image the tasks run (default the Pipeline's)"},
		{&o.PushSecret, "push-secret", "with --tekton: the kubernetes.io/dockerconfigjson Secret to push with"},
		{&o.SigningSecret, "signing-secret", "with --tekton: the Secret with cosign.key and cosign.password to sign with"},
	} {
		fl.StringVar(s.v, s.name, "", s.help)
	}
}

// RegisterStatus adds depot status's --tekton, --kubeconfig and --namespace.
func (o *Options) RegisterStatus(fl *pflag.FlagSet) {
	fl.BoolVar(&o.On, "tekton", false, "read the depot's PipelineRuns' live state (default: when its depot.json says it ran on Tekton; --tekton=false prints the record as saved)")
	fl.StringVar(&o.Kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&o.Namespace, "namespace", "", "the namespace of the depot's PipelineRuns (default the one its depot.json names)")
}

// ReadStatus is depot status: the record in dir, with its PipelineRuns' live state when it
// ran on Tekton (or --tekton says so), unless --tekton=false.
func (o Options) ReadStatus(ctx context.Context, fl *pflag.FlagSet, dir string, log *slog.Logger) (*depot.Summary, error) {
	if fl.Changed("tekton") && !o.On {
		s, err := depot.ReadStatus(dir)
		return s, badinput.Wrap(err)
	}
	return Status(ctx, dir, o, o.On, log)
}

// DefaultClaim is the claim a depot binds when --claim is not given.
const DefaultClaim = "snofactory"

// Run runs the depot of target on Tekton with --tekton, else on this machine.
func (o Options) Run(ctx context.Context, target string, cfg depot.Config, vms int) (*depot.Summary, error) {
	if !o.On {
		return depot.Run(ctx, cfg)
	}
	return RunDepot(ctx, o, target, cfg.Builds, vms, cfg.OutputDir, cfg.Log)
}

// RunDepot connects as the kubeconfig says and runs the depot's builds (those of the
// depot file target) on Tekton, vms PipelineRuns at once.
func RunDepot(ctx context.Context, o Options, target string, builds []depot.Build, vms int, outputDir string, log *slog.Logger) (*depot.Summary, error) {
	dyn, ns, err := Client(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if o.Namespace != "" {
		ns = o.Namespace
	}
	if o.Claim == "" {
		o.Claim = DefaultClaim
	}
	if o.SourceDir == "" {
		// The claim's source subPath holds the depot's checkout: the depot file's directory
		// (or the directory of blueprints given).
		o.SourceDir = filepath.Dir(target)
		if fi, err := os.Stat(target); err == nil && fi.IsDir() {
			o.SourceDir = target
		}
	}
	kubeconfig, err := absOrEmpty(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return Run(ctx, Config{Client: dyn, Kubeconfig: kubeconfig, Namespace: ns, Claim: o.Claim, SourceDir: o.SourceDir,
		PushSecret: o.PushSecret, SigningSecret: o.SigningSecret, Image: o.Image,
		Builds: builds, Slots: vms, OutputDir: outputDir, Log: log})
}

// absOrEmpty is path made absolute, or "" for none.
func absOrEmpty(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return abs, nil
}
