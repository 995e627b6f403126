package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline/versions"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := runMain(t, "version")
	if code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	want := "snofactory " + versions.Self() + "\n" +
		"go " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if stdout != want {
		t.Fatalf("stdout %q, want %q", stdout, want)
	}
	if code, _, stderr := runMain(t, "version", "extra"); code != exitBadInput || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("version extra: exit %d, stderr %q; want exit %d", code, stderr, exitBadInput)
	}
}
