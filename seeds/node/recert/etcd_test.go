package recert

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clocktest"
)

// The standalone etcd is polled as lifecycle-agent polls it: GET /health every second,
// for at most a minute, and the error names the last answer.
func TestWaitEtcd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		healthyAt int
		wantCalls int
		wantErr   string
	}{
		{"healthy on the third poll", 3, 3, ""},
		{"never healthy", 0, 61, "etcd for recert not healthy within 1m0s: curl: (7) Failed to connect to localhost port 2379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			run := func(_ context.Context, name string, args ...string) ([]byte, error) {
				calls++
				if got := strings.Join(append([]string{name}, args...), " "); got != "curl --silent --fail --max-time 5 http://localhost:2379/health" {
					t.Errorf("ran %q", got)
				}
				if calls == tc.healthyAt {
					return []byte(`{"health":"true","reason":""}`), nil
				}
				return nil, errors.New("curl: (7) Failed to connect to localhost port 2379")
			}
			err := WaitEtcd(context.Background(), run, clocktest.New(time.Unix(1e9, 0)))
			if calls != tc.wantCalls || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("calls %d, err %v; want %d, %q", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
