package precache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestParallel(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name         string
		jobs, n      int
		failAt       int // -1: none
		cancelParent bool
		wantErr      error
		wantAll      bool
	}{
		{"all run, at most jobs at once", 3, 20, -1, false, nil, true},
		{"jobs 0 still runs", 0, 4, -1, false, nil, true},
		{"first error stops the rest", 2, 50, 0, false, boom, false},
		{"cancelled parent", 2, 50, -1, true, context.Canceled, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ran, running, peak atomic.Int64
			err := parallel(parent, tc.jobs, tc.n, func(ctx context.Context, i int) error {
				ran.Add(1)
				now := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				if tc.cancelParent && i == 0 {
					cancel()
				}
				if i == tc.failAt {
					return boom
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(2 * time.Millisecond):
					return nil
				}
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := ran.Load(); (got == int64(tc.n)) != tc.wantAll {
				t.Errorf("%d of %d ran", got, tc.n)
			}
			if p := peak.Load(); p > int64(max(tc.jobs, 1)) {
				t.Errorf("%d ran at once, limit %d", p, tc.jobs)
			}
		})
	}
}
