package clock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/clocktest"
)

func TestWait(t *testing.T) {
	broken := errors.New("broken")
	for _, tc := range []struct {
		name      string
		timeout   time.Duration
		doneAt    int // the call that reports done; 0 never
		failAt    int // the call that fails; 0 never
		cancelAt  int // the sleep that cancels ctx; 0 never
		wantErr   error
		wantCalls int
		wantTook  time.Duration
		wantWhy   string
	}{
		{name: "done at once", timeout: time.Minute, doneAt: 1, wantCalls: 1},
		{name: "done on the third call", timeout: time.Minute, doneAt: 3, wantCalls: 3, wantTook: 20 * time.Second},
		{name: "timeout names the last reason", timeout: 25 * time.Second, wantErr: clock.ErrWaitTimeout, wantCalls: 4, wantTook: 30 * time.Second, wantWhy: "not yet (4)"},
		{name: "try fails", timeout: time.Minute, failAt: 2, wantErr: broken, wantCalls: 2, wantTook: 10 * time.Second, wantWhy: "failing (2)"},
		{name: "no timeout until cancelled", cancelAt: 5, wantErr: context.Canceled, wantCalls: 5, wantTook: 50 * time.Second, wantWhy: "not yet (5)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &clocktest.Clock{T: time.Unix(1e9, 0), OnSleep: func(n int, _ time.Time) {
				if n == tc.cancelAt {
					cancel()
				}
			}}
			calls := 0
			took, why, err := clock.Wait(ctx, c, 10*time.Second, tc.timeout, func(context.Context) (bool, string, error) {
				calls++
				switch calls {
				case tc.doneAt:
					return true, "", nil
				case tc.failAt:
					return false, fmt.Sprintf("failing (%d)", calls), broken
				}
				return false, fmt.Sprintf("not yet (%d)", calls), nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if calls != tc.wantCalls || took != tc.wantTook || why != tc.wantWhy {
				t.Errorf("calls %d, took %s, why %q; want %d, %s, %q", calls, took, why, tc.wantCalls, tc.wantTook, tc.wantWhy)
			}
		})
	}
}
