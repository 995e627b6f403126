package resolve

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"syscall"

	"github.com/containers/image/v5/docker"

	"github.com/snofactory/snofactory/pipeline/netlimit"
)

// statusRe finds the HTTP status containers/image puts into error texts.
var statusRe = regexp.MustCompile(`(?:StatusCode: |status code |: )(5\d\d|429)\b|too many requests|TOOMANYREQUESTS|UNAVAILABLE`)

// transient reports whether err is worth retrying: server errors, throttling, resets and
// truncated bodies. Not found, unauthorized and bad content are not.
func transient(err error) bool {
	var stall *netlimit.StallError
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &stall) {
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

// retry runs fn under the project's one retry policy (netlimit.DefaultPolicy): containers/
// image does not retry failed requests, and a depot's link to its registry is not perfect.
// transient reads the failures containers/image reports (a 5xx or 429 in its error) that
// netlimit cannot.
func retry(ctx context.Context, fn func() error) error {
	return netlimit.DefaultPolicy().Do(ctx, func() error {
		err := fn()
		if transient(err) {
			return netlimit.Retryable(err)
		}
		return err
	})
}
