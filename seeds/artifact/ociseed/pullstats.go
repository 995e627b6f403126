package ociseed

import (
	"fmt"

	units "github.com/docker/go-units"
)

// Summary says where a pull's chunks came from, as a clause to append to the pull's
// report ("; fetched 3 chunks (...)"); from is the --from seed the reused chunks came
// from. A pull that moved no chunks (an unchunked seed) says nothing.
func (s PullStats) Summary(from string) string {
	if s.Fetched+s.Reused+s.Resumed == 0 {
		return ""
	}
	out := fmt.Sprintf("; fetched %d chunks (%s)", s.Fetched, units.BytesSize(float64(s.FetchedBytes)))
	if from != "" {
		out += fmt.Sprintf(", reused %d (%s) from %s", s.Reused, units.BytesSize(float64(s.ReusedBytes)), from)
	}
	if s.Resumed > 0 {
		out += fmt.Sprintf(", %d staged by the interrupted pull", s.Resumed)
	}
	return out
}
