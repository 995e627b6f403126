package reconfigure

import (
	"strings"
	"testing"
	"time"
)

// The API's answers are decoded strictly: a key named twice (a condition's status, say)
// or data after the answer is refused at its place, not read one way or the other.
func TestAPIAnswersStrict(t *testing.T) {
	settled := func(pools, nodes string) error {
		_, _, err := machineConfigSettled([]byte(pools), []byte(nodes))
		return err
	}
	cv := func(b string) error { _, _, err := clusterVersionReady([]byte(b), time.Time{}); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"pools: duplicate at depth", settled(`{"items":[{"status":{"conditions":[{"type":"Updated","status":"False","status":"True"}]}}]}`, `{"items":[]}`),
			`reading the MachineConfigPools: line 1, column 71: duplicate key "status" (first at line 1, column 54)`},
		{"nodes: data after it", settled(`{"items":[]}`, `{"items":[]}`+"\n{}"), "line 2, column 1: data after the JSON document"},
		{"cluster version: duplicated key", cv(`{"status":{},` + "\n" + `"status":{}}`), `line 2, column 1: duplicate key "status" (first at line 1, column 2)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", tc.err, tc.want)
			}
		})
	}
}
