package resolve

import (
	"context"
	"errors"
	"testing"

	"github.com/containers/image/v5/docker"

	"github.com/snofactory/snofactory/pipeline/netlimit"
)

// Registry operations retry under the project's one policy: a 500 that containers/image
// reports inside its error is tried exactly as many times as every other request, and the
// error says the tries ran out; a 404 is not tried again.
func TestRetryFollowsTheOnePolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		tries     int
		exhausted bool
	}{
		{"server error", 500, netlimit.DefaultPolicy().Attempts, true},
		{"throttled", 429, netlimit.DefaultPolicy().Attempts, true},
		{"not found", 404, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := retry(context.Background(), func() error {
				tries++
				return docker.UnexpectedHTTPStatusError{StatusCode: tc.status}
			})
			var ex *netlimit.ExhaustedError
			var se docker.UnexpectedHTTPStatusError
			if tries != tc.tries || errors.As(err, &ex) != tc.exhausted || !errors.As(err, &se) || se.StatusCode != tc.status {
				t.Errorf("%d tries, error %v; want %d tries, exhausted %v, the status kept", tries, err, tc.tries, tc.exhausted)
			}
		})
	}
}
