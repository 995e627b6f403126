package steps

import (
	"context"
	"fmt"
)

// Action is a step and what carries it out; Do returns what the step reports.
type Action[R any] struct {
	Step
	Do func(ctx context.Context) (R, error)
}

// Hooks observe an execution; any may be nil.
type Hooks[R any] struct {
	// Skip tells a step an earlier, interrupted run has done; it is not run again, and
	// Skipped is called instead.
	Skip    func(name string) bool
	Skipped func(name string)
	// Start is called before a step runs, Failed when it fails.
	Start  func(name string)
	Failed func(name string, err error)
	// Done is called with what a step returned; an error from it (recording the progress,
	// say) stops the execution as that step's failure, without calling Failed.
	Done func(name string, r R) error
}

// StepError is a failed step.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Execute carries out the actions in order and stops at the first failure, which it
// returns as a *StepError naming the step. The seal of a seed and a site's
// reconfiguration both run their plans through it, so the list a dry run prints is
// executed the same way in both.
func Execute[R any](ctx context.Context, acts []Action[R], h Hooks[R]) error {
	for _, a := range acts {
		if h.Skip != nil && h.Skip(a.Name) {
			if h.Skipped != nil {
				h.Skipped(a.Name)
			}
			continue
		}
		if h.Start != nil {
			h.Start(a.Name)
		}
		r, err := a.Do(ctx)
		if err != nil {
			if h.Failed != nil {
				h.Failed(a.Name, err)
			}
			return &StepError{Step: a.Name, Err: err}
		}
		if h.Done != nil {
			if err := h.Done(a.Name, r); err != nil {
				return &StepError{Step: a.Name, Err: err}
			}
		}
	}
	return nil
}
