package versions

import (
	"runtime/debug"
	"testing"
)

func TestOf(t *testing.T) {
	rev := "0123456789abcdef0123"
	for _, tc := range []struct {
		name     string
		version  string
		settings map[string]string
		want     string
	}{
		{"release", "v1.2.3", nil, "v1.2.3"},
		{"checkout", "(devel)", map[string]string{"vcs.revision": rev}, "(devel) 0123456789ab"},
		{"dirty checkout", "(devel)", map[string]string{"vcs.revision": rev, "vcs.modified": "true"}, "(devel) 0123456789ab+dirty"},
		{"pseudo-version names the revision already", "v0.0.0-20260101000000-0123456789ab+dirty", map[string]string{"vcs.revision": rev, "vcs.modified": "true"}, "v0.0.0-20260101000000-0123456789ab+dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: tc.version}}
			for k, v := range tc.settings {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
			}
			if got := Of(bi); got != tc.want {
				t.Errorf("Of = %q, want %q", got, tc.want)
			}
		})
	}
}
