package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// OutputRecord is the file, in a stage's output folder, that holds the typed record other
// stages read: paths relative to the folder plus the metadata downstream needs. The record's
// Go type belongs to the stages (stages/internal/handoff); the engine only stores and hands
// back its JSON.
const OutputRecord = "output.json"

// WriteOutput stores v as this stage's output record.
func (e *Env) WriteOutput(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("stage %s: encoding its output record: %w", e.stage, err)
	}
	return os.WriteFile(filepath.Join(e.Out, OutputRecord), append(b, '\n'), 0o644)
}

// ReadOutput decodes the output record of upstream stage into v and returns that stage's
// (read-only) output folder. The stage must be one of this stage's Deps.
func (e *Env) ReadOutput(stage string, v any) (string, error) {
	dir, ok := e.Inputs[stage]
	if !ok {
		return "", fmt.Errorf("stage %s reads the output of %s, which is not one of its dependencies (a wiring bug)", e.stage, stage)
	}
	b, err := os.ReadFile(filepath.Join(dir, OutputRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the %s stage's output has no %s (made by an older snofactory?): rebuild it with --force %s", stage, OutputRecord, stage)
	}
	if err != nil {
		return "", fmt.Errorf("reading the %s stage's output record: %w", stage, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return "", fmt.Errorf("the %s stage's %s: %w", stage, OutputRecord, err)
	}
	return dir, nil
}

// Cleaner takes the cleanup of a resource at the moment the resource is created. Code that
// creates resources (a VM, a registry process, a scratch disk) accepts a Cleaner so it works
// inside a stage (Env) and outside one (Cleanups) alike.
type Cleaner interface {
	Cleanup(what string, fn func(context.Context) error)
}

// CleanupTimeout bounds each cleanup: they run after cancellation too, on a fresh context.
const CleanupTimeout = 30 * time.Second

// Cleanups is a stack of cleanups run in reverse order of registration (Packer's multistep).
// The zero value is ready to use. It is not safe for concurrent registration.
type Cleanups struct {
	steps []cleanupStep
}

type cleanupStep struct {
	what string
	fn   func(context.Context) error
}

// Cleanup implements Cleaner.
func (c *Cleanups) Cleanup(what string, fn func(context.Context) error) {
	c.steps = append(c.steps, cleanupStep{what, fn})
}

// Run runs every registered cleanup, newest first, each with its own bounded context that
// does not inherit cancellation (a cancelled build must still stop its VMs), and returns
// their errors joined. The stack is empty afterwards.
func (c *Cleanups) Run() error {
	steps := c.steps
	c.steps = nil
	var errs []error
	for _, s := range slices.Backward(steps) {
		ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
		err := runCleanup(ctx, s)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("cleaning up %s: %w", s.what, err))
		}
	}
	return errors.Join(errs...)
}

// runCleanup turns a panicking cleanup into an error, so the others still run.
func runCleanup(ctx context.Context, s cleanupStep) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v (this is a bug in snofactory)", r)
		}
	}()
	return s.fn(ctx)
}

// Cleanup registers fn to run when the stage's Run returns, whatever the outcome (success,
// failure or cancellation), before its outputs are committed; cleanups run newest first.
// Register each one right after creating the resource it releases.
func (e *Env) Cleanup(what string, fn func(context.Context) error) {
	e.cleanups.Cleanup(what, fn)
}
