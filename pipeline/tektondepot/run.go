package tektondepot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/depot"
)

// Config is one depot run on Tekton.
type Config struct {
	Client dynamic.Interface
	// Kubeconfig is the path Client was made from, recorded for depot status ("" for the
	// default one).
	Kubeconfig string
	Namespace  string
	// Claim is the PersistentVolumeClaim every PipelineRun binds: subPath source holds
	// SourceDir's contents (the depot's checkout), cache the shared cache, output/NAME each
	// build's output.
	Claim     string
	SourceDir string
	// PushSecret (kubernetes.io/dockerconfigjson) and SigningSecret (cosign.key,
	// cosign.password) are bound when given.
	PushSecret, SigningSecret string
	// Image is the snofactory image the tasks run (empty: the Pipeline's default).
	Image  string
	Builds []depot.Build
	// Slots is how many PipelineRuns run at once: the depot's VM slots.
	Slots     int
	OutputDir string
	Log       *slog.Logger
}

// Run installs the Tasks and the Pipeline, then runs one PipelineRun per build, at most
// Slots at once, and keeps OutputDir's depot.json current. Cancelled (Ctrl-C), it cancels
// the PipelineRuns it started and returns the context's error.
func Run(ctx context.Context, cfg Config) (*depot.Summary, error) {
	if len(cfg.Builds) == 0 {
		return nil, badinput.Errorf("depot: nothing to build")
	}
	params, err := blueprintParams(cfg)
	if err != nil {
		return nil, err
	}
	if err := Install(ctx, cfg.Client, cfg.Namespace); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutputDir, 0o755); err != nil {
		return nil, fmt.Errorf("depot output directory: %w", err)
	}
	lock, err := depot.Lock(cfg.OutputDir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	id, err := newDepotID()
	if err != nil {
		return nil, err
	}
	sum := &depot.Summary{Status: depot.StatusRunning, Started: time.Now(),
		Tekton: &depot.TektonRun{Namespace: cfg.Namespace, Depot: id, Kubeconfig: cfg.Kubeconfig}}
	for _, b := range cfg.Builds {
		sum.Builds = append(sum.Builds, depot.Result{Build: b, Status: depot.StatusQueued,
			OutputDir: cfg.Claim + ":output/builds/" + b.Name})
	}
	rec, err := depot.NewRecord(cfg.OutputDir, sum, cfg.Log)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, rec: rec, depotID: id, cluster: cluster{cfg.Client, cfg.Namespace}}
	sem := make(chan struct{}, max(cfg.Slots, 1))
	var wg sync.WaitGroup
	for i := range sum.Builds {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.run(ctx, i, params[i])
		}()
	}
	wg.Wait()
	return rec.Finish(ctx)
}

// blueprintParams is each build's BLUEPRINT: its path relative to SourceDir, which the
// claim's source subPath holds; a blueprint outside it would not be in the workspace.
func blueprintParams(cfg Config) ([]string, error) {
	root, err := filepath.Abs(cfg.SourceDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range cfg.Builds {
		abs, err := filepath.Abs(b.Blueprint)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, badinput.Errorf("blueprint %s is outside %s, the directory the claim's source subPath holds: move it under the depot file's directory or give --source-dir", b.Blueprint, cfg.SourceDir)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}

type runner struct {
	cluster
	cfg     Config
	rec     *depot.Record
	depotID string
}

// run is one build: its PipelineRun created, watched to its end and recorded.
func (r *runner) run(ctx context.Context, i int, blueprint string) {
	b := r.rec.Build(i).Build
	r.rec.Update(i, func(res *depot.Result) { res.Status, res.Started, res.Attempts = depot.StatusRunning, time.Now(), 1 })
	name, err := r.create(ctx, b.Name, blueprint)
	if err != nil {
		r.rec.Update(i, func(res *depot.Result) {
			res.Status, res.Finished, res.Error = depot.StatusFailed, time.Now(), err.Error()
		})
		return
	}
	r.rec.Update(i, func(res *depot.Result) { res.PipelineRun = name })
	r.cfg.Log.Info("PipelineRun started", "build", b.Name, "pipelineRun", name)
	pr, err := r.wait(ctx, name)
	if err != nil {
		status := depot.StatusFailed
		if ctx.Err() != nil && r.cancel(name) {
			status = depot.StatusCancelled
		}
		r.rec.Update(i, func(res *depot.Result) {
			res.Status, res.Finished, res.Error = status, time.Now(), err.Error()
		})
		return
	}
	out := r.outcome(ctx, pr)
	r.cfg.Log.Info("PipelineRun finished", "build", b.Name, "pipelineRun", name, "status", out.Status)
	r.rec.Update(i, func(res *depot.Result) {
		res.Status, res.Finished, res.FailedStage, res.Error = out.Status, time.Now(), out.FailedStage, out.Error
		res.ImageURL, res.ImageDigest = out.ImageURL, out.ImageDigest
	})
}

// dnsLabel keeps what a Kubernetes name may hold.
var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// runPrefix is generateName for a build's PipelineRun: the API server appends 5
// characters, and the whole must be a DNS label (63).
func runPrefix(build string) string {
	s := labelValue(build)
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	return "snofactory-" + s + "-"
}

// labelValue makes s a label value (63 characters of [a-z0-9-], alphanumeric at the ends).
func labelValue(s string) string {
	s = strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

// newDepotID names one depot run in its PipelineRuns' depotLabel.
func newDepotID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("depot id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// The labels of a depot's PipelineRuns: depot status finds them by depotLabel.
const (
	managedBy      = "app.kubernetes.io/managed-by"
	managedByDepot = "snofactory-depot"
	depotLabel     = "snofactory.io/depot"
	buildLabel     = "snofactory.io/build"
)

// Selector selects every PipelineRun a depot runner made, whichever depot it belongs to.
const Selector = managedBy + "=" + managedByDepot

func errorf(pipelineRun, format string, a ...any) error {
	return fmt.Errorf("PipelineRun %s: "+format, append([]any{pipelineRun}, a...)...)
}
