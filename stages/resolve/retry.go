package resolve

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"syscall"
	"time"

	"github.com/containers/image/v5/docker"
)

// attempts and backoff for registry operations: containers/image does not retry failed
// requests, and a depot's link to its registry is not perfect.
const (
	attempts  = 6
	retryBase = 200 * time.Millisecond
	retryMax  = 5 * time.Second
)

// statusRe finds the HTTP status containers/image puts into error texts.
var statusRe = regexp.MustCompile(`(?:StatusCode: |status code |: )(5\d\d|429)\b|too many requests|TOOMANYREQUESTS|UNAVAILABLE`)

// transient reports whether err is worth retrying: server errors, throttling, resets and
// truncated bodies. Not found, unauthorized and bad content are not.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var se docker.UnexpectedHTTPStatusError
	if errors.As(err, &se) {
		return se.StatusCode >= 500 || se.StatusCode == 429
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &ne) || statusRe.MatchString(err.Error())
}

// retry runs fn until it succeeds, fails for good, or the attempts run out.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			d := min(retryBase<<(i-1), retryMax)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d/2 + rand.N(d/2+1)):
			}
		}
		if err = fn(); err == nil || !transient(err) {
			return err
		}
	}
	return err
}
