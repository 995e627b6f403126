package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

// childBound is how long one command a test runs may take before the test's context ends
// it. Commands in these tests take milliseconds; the bound stops one that reads something it
// should have refused (a FIFO, /dev/zero, an endless answer), and the child runner fails the
// test naming it. It is the context's deadline, not an assertion on how long a command took.
const childBound = time.Minute

// runMain runs the real binary with args, as a user does: under the child runner's memory
// limit, in its own process group, and bounded by a context from the test. A command that
// blocks or grows fails its own test instead of the whole test binary.
func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runMainWith(t, nil, args...)
}

// runMainWith is runMain with setup adjusting the child before it starts (its environment,
// its stdin), so a test changes the child's world and not the test process's.
func runMainWith(t *testing.T, setup func(*exec.Cmd), args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), childBound)
	defer cancel()
	return testbin.RunChild(ctx, t, snofactoryBin.Path(t), args, setup)
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

// tinyBlueprint writes a valid blueprint whose live ISO is not built yet, so no stage can get
// far: what these tests check happens before any stage runs.
func tinyBlueprint(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.yaml")
	bp := `apiVersion: snofactory.io/v1alpha1
kind: Blueprint
metadata:
  name: tiny
spec:
  target:
    type: coreos
    ignitionVersion: 3.3.0
  source:
    path: not-built-yet.iso
    generatedBy: make conformance-iso
  butane:
    - inline: |
        variant: fcos
        version: 1.4.0
`
	if err := os.WriteFile(p, []byte(bp), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPathAndSelectionErrorsAreBadInput: an output path of the wrong kind or a selection the
// graph cannot build is the user's input (exit 2), and a refused build leaves nothing on disk.
func TestPathAndSelectionErrorsAreBadInput(t *testing.T) {
	bp := tinyBlueprint(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	fifo, bpLink, dirLink := filepath.Join(dir, "fifo"), filepath.Join(dir, "bp-link"), filepath.Join(dir, "dir-link")
	if err := errors.Join(syscall.Mkfifo(fifo, 0o644), os.Symlink(bp, bpLink), os.Symlink(t.TempDir(), dirLink)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		msgs []string
	}{
		{"until no such stage", []string{"build", bp, "--until", "bogus", "--cache-dir", cache, "--output-dir", out}, []string{"--until bogus: no such stage"}},
		{"force no such stage", []string{"build", bp, "--force", "bogus", "--cache-dir", cache, "--output-dir", out}, []string{"--force bogus"}},
		{"output dir is a file", []string{"build", bp, "--until", "render", "--cache-dir", cache, "--output-dir", file}, []string{"is a file, not a directory"}},
		{"cache dir is a file", []string{"build", bp, "--until", "render", "--cache-dir", file, "--output-dir", out}, []string{"is a file, not a directory"}},
		{"plan cache dir is a file", []string{"plan", bp, "--cache-dir", file}, []string{"is a file, not a directory"}},
		{"plan until no such stage", []string{"plan", bp, "--until", "bogus", "--cache-dir", cache}, []string{"--until bogus"}},
		{"render into a file", []string{"render", bp, "-o", file}, []string{"not a directory"}},
		{"lock into a directory", []string{"lock", bp, "-o", dir}, []string{"-o " + dir + ": is a directory"}},
		{"lock over its own blueprint", []string{"lock", bp, "-o", bp}, []string{"is this command's input"}},
		{"lock onto a FIFO", []string{"lock", bp, "-o", fifo}, []string{"-o " + fifo + ": is neither a regular file nor a block device"}},
		{"lock onto a symlink to its blueprint", []string{"lock", bp, "-o", bpLink}, []string{"-o " + bpLink + ": is this command's input"}},
		{"lock onto a symlink to a directory", []string{"lock", bp, "-o", dirLink}, []string{"-o " + dirLink + ": is a directory"}},
		{"iso embed into a directory", []string{"iso", "embed", file, "-i", file, "-o", dir}, []string{"-o " + dir + ": is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runMain(t, tt.args...)
			if code != exitBadInput {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitBadInput, stderr)
			}
			for _, msg := range tt.msgs {
				if !strings.Contains(stderr, msg) {
					t.Errorf("stderr %q lacks %q", stderr, msg)
				}
			}
			for _, p := range []string{out, cache} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refused command (%v)", p, err)
				}
			}
		})
	}
}

// TestOutputFile: -o FILE naming a directory is bad input; a file or a new name is fine.
func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		code int
	}{{dir, exitBadInput}, {file, exitOK}, {filepath.Join(dir, "new"), exitOK}} {
		code := exitOK
		if err := outputFile("-o", tt.path); err != nil {
			code = exitCode(err)
		}
		if code != tt.code {
			t.Errorf("-o %s: exit %d, want %d", tt.path, code, tt.code)
		}
	}
}
