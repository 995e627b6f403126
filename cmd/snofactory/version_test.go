package main

import (
	"debug/buildinfo"
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
	// The binary the test runs is built apart from the test, with its own build info.
	bi, err := buildinfo.ReadFile(snofactoryBin.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	want := "snofactory " + versions.Of(bi) + "\n" +
		"go " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if stdout != want {
		t.Fatalf("stdout %q, want %q", stdout, want)
	}
	if code, _, stderr := runMain(t, "version", "extra"); code != exitBadInput || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("version extra: exit %d, stderr %q; want exit %d", code, stderr, exitBadInput)
	}
}
