// Package clock is the one time source of snofactory: the engine's cache and lease times,
// the stages' timestamps and the node agent's waits all read a Clock, so a test swaps in
// clocktest's fake and never waits for, or races, real time. Wait is the poll loop built
// on it.
package clock

import (
	"context"
	"errors"
	"time"
)

// Clock is the time source of a wait (a poll loop, a timeout); tests pass one that moves on
// by what is slept, so no test waits for real time.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the wall clock, the default wherever a Clock is left nil.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// Sleep waits for d or until ctx ends.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ErrWaitTimeout is Wait's error when the timeout passed before try was done.
var ErrWaitTimeout = errors.New("timed out")

// Wait polls: it calls try at once and then every interval until try reports done, try
// fails, ctx ends, or timeout (0: none) has passed since the first call. It returns how
// long that took and try's last reason for not being done, for the caller's message: the
// error is ErrWaitTimeout, ctx's error, or try's own.
func Wait(ctx context.Context, c Clock, interval, timeout time.Duration, try func(ctx context.Context) (done bool, why string, err error)) (took time.Duration, why string, err error) {
	start := c.Now()
	for {
		done, reason, err := try(ctx)
		took = c.Now().Sub(start)
		if err != nil {
			return took, reason, err
		}
		if done {
			return took, "", nil
		}
		why = reason
		if timeout > 0 && took >= timeout {
			return took, why, ErrWaitTimeout
		}
		if err := c.Sleep(ctx, interval); err != nil {
			return c.Now().Sub(start), why, err
		}
	}
}

// Or is c, or the wall clock when c is nil: the default of every optional Clock field.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
