package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/seeds/site/siteconfig/isotest"
)

// reconfigure fails with exit 1, the step and the error on stderr, and the failure reported
// on the port, for a malformed medium and for a missing one; with no --target and no
// sealed seed it is the user's input that is wrong (exit 2). (A successful run would run
// ip and hostname against this machine; seeds/node/reconfigure tests those with recorded
// command lines.)
func TestAgentReconfigureFailures(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.iso")
	isotest.Write(t, bad, siteconfig.VolumeLabel, map[string]string{siteconfig.ConfigFileName: "apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\nmetadata: {name: x}\nspec: {hostname: a, colour: red}\n"})
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"malformed", []string{"--target", "coreos", "--medium", bad}, 1, []string{"step medium", "colour", "fix the medium and reboot"}},
		{"missing", []string{"--target", "coreos", "--medium", "/nonexistent/site.iso", "--medium-timeout", "1s"}, 1,
			[]string{"step medium", "no site-config medium (volume label SNOSITE) after 1s"}},
		{"no target", nil, 2, []string{"no --target and no sealed seed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root, port := filepath.Join(dir, "root"), filepath.Join(dir, "port")
			os.MkdirAll(root, 0o755)
			os.WriteFile(port, nil, 0o644)
			args := append([]string{"agent", "reconfigure", "--root", root, "--port", port, "--state-dir", filepath.Join(dir, "seq")}, tc.args...)
			code, _, stderr := runCLI(args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.code != 1 {
				return
			}
			pf, _ := os.Open(port)
			defer pf.Close()
			dec := wire.NewDecoder(pf)
			var last wire.Message
			for m, err := dec.Next(); err == nil; m, err = dec.Next() {
				last = m
			}
			if !last.Final() || last.Phase != wire.PhaseReconfigured || last.Status != wire.StatusFailed || last.Details["step"] != "medium" {
				t.Errorf("last message %+v", last)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("the root was changed: %v", entries)
			}
		})
	}
}
