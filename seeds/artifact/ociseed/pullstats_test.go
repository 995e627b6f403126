package ociseed_test

import (
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
)

func TestPullStatsSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    ociseed.PullStats
		from string
		want string
	}{
		{"no chunks", ociseed.PullStats{}, "old", ""},
		{"fetched only", ociseed.PullStats{Fetched: 3, FetchedBytes: 3 << 20}, "", "; fetched 3 chunks (3MiB)"},
		{"reused from old", ociseed.PullStats{Fetched: 1, FetchedBytes: 1024, Reused: 4, ReusedBytes: 4 << 20}, "old",
			"; fetched 1 chunks (1KiB), reused 4 (4MiB) from old"},
		{"resumed", ociseed.PullStats{Resumed: 2}, "", "; fetched 0 chunks (0B), 2 staged by the interrupted pull"},
	} {
		if got := tc.s.Summary(tc.from); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
