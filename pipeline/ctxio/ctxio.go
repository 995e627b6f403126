// Package ctxio makes long reads cancellable: a copy or hash of a multi-GB disk or ISO
// checks the context between reads, so it stops when the build is cancelled.
package ctxio

import (
	"context"
	"io"
)

// Reader reads r until ctx ends; then every Read returns ctx's error.
func Reader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Abandoning reads r, whose Read may wait forever (stdin from a terminal, or a pipe whose
// writer never closes it, neither of which a deadline reaches), until ctx ends; then Read
// returns at once with ctx's cause. The Read under way is left to finish in a goroutine and
// whatever it reads is dropped, so nothing may read r after ctx ends: use it for a read
// that an interrupted command gives up with, as for stdin.
func Abandoning(ctx context.Context, r io.Reader) io.Reader { return abandoning{ctx, r} }

type abandoning struct {
	ctx context.Context
	r   io.Reader
}

type readResult struct {
	n   int
	err error
}

func (a abandoning) Read(p []byte) (int, error) {
	if a.ctx.Err() != nil {
		return 0, context.Cause(a.ctx)
	}
	// The goroutine reads into its own buffer: p is the caller's again once Read returns,
	// even while an abandoned read is still waiting to fill it.
	buf := make([]byte, len(p))
	done := make(chan readResult, 1)
	go func() {
		n, err := a.r.Read(buf)
		done <- readResult{n, err}
	}()
	select {
	case res := <-done:
		return copy(p, buf[:res.n]), res.err
	case <-a.ctx.Done():
		return 0, context.Cause(a.ctx)
	}
}
