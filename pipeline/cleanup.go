package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

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
