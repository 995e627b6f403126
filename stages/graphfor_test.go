package stages

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGraphFor(t *testing.T) {
	spec := "  target:\n    type: coreos\n  source:\n    path: live.iso\n"
	for _, tc := range []struct {
		name      string
		opts      Options
		publishes bool
		wantErr   string // after "PATH: "
	}{
		{"no signing", Options{}, true, ""},
		{"a signing key that does not publish", Options{SignKey: "missing.key"}, false, ""},
		{"a signing key with nowhere to push", Options{SignKey: "missing.key"}, true, "signing needs spec.outputs.push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bp := loadBlueprint(t, spec)
			path := filepath.Join(bp.Dir(), "bp.yaml")
			g, _, err := GraphFor(path, bp, tc.opts, tc.publishes)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), path+": "+tc.wantErr) {
					t.Fatalf("error %v, want %q", err, path+": "+tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := append([]string{path}, bp.Resolved.Inputs()...); !slices.Equal(g.Inputs, want) {
				t.Errorf("inputs %v, want %v", g.Inputs, want)
			}
			if !slices.Contains(g.Inputs, bp.Resolved.ISO) {
				t.Errorf("inputs %v lack the ISO %s", g.Inputs, bp.Resolved.ISO)
			}
		})
	}
}
