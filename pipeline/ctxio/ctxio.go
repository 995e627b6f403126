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
