// Package clocktest is a pipeline.Clock for tests: waits cost no time, and a test can act
// at any sleep (cancel the wait, change what is waited for).
package clocktest

import (
	"context"
	"time"
)

// Clock moves on by what is slept. OnSleep, when set, runs as the nth sleep ends, with the
// time after it; Sleep then returns the context's error, as a real sleep would.
type Clock struct {
	T       time.Time
	Sleeps  int
	OnSleep func(n int, now time.Time)
}

// New starts a Clock at t.
func New(t time.Time) *Clock { return &Clock{T: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time { return c.T }

// Sleep moves the clock on by d.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.T = c.T.Add(d)
	c.Sleeps++
	if c.OnSleep != nil {
		c.OnSleep(c.Sleeps, c.T)
	}
	return ctx.Err()
}
