package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: snofactory.io/v1alpha1\nkind: Blueprint\nmetadata:\n  name: x\nspec:\n  target:\n    type: nope\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"help", []string{"--help"}, 0, ""},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"unknown flag", []string{"build", "--frob", "x.yaml"}, 2, "unknown flag"},
		{"missing argument", []string{"build"}, 2, "takes 1 argument"},
		{"missing file", []string{"build", filepath.Join(dir, "absent.yaml")}, 2, "absent.yaml"},
		{"invalid blueprint", []string{"plan", bad}, 2, "bad.yaml:7:"},
		{"bad progress", []string{"build", "--progress", "fancy", bad}, 2, ""},
		{"render without -o", []string{"render", bad}, 2, "-o DIR"},
		{"plan bad output", []string{"plan", "--output", "xml", bad}, 2, "--output"},
		{"release info bad reference", []string{"release", "info", "Not A Ref"}, 2, "not an image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runMain(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr)
			}
			if !strings.Contains(stderr, tt.msg) {
				t.Fatalf("stderr %q lacks %q", stderr, tt.msg)
			}
			if strings.Contains(stderr, "goroutine ") {
				t.Fatalf("panic trace reached the user: %s", stderr)
			}
		})
	}
}
