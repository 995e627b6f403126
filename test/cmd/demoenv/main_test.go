package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// roleEnv makes the test binary act as demoenv itself ("demoenv") or as the command demoenv
// runs ("command"), so the tests run the real program without building it.
const roleEnv = "SNOFACTORY_DEMOENV_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "demoenv":
		main()
	case "command":
		os.Exit(command(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// command stands in for snofactory build: it pulls the extra image the blueprint names,
// says so on stdout, and waits until the file release exists.
func command(args []string) int {
	bp, err := blueprints.LoadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ref, err := name.ParseReference(bp.Spec.ExtraImages[0], name.Insecure)
	if err == nil {
		_, err = remote.Image(ref)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pulling the demo image:", err)
		return 1
	}
	fmt.Printf("ready %d %s %s\n", os.Getpid(), ref, args[0])
	for {
		if _, err := os.Stat(args[1]); err == nil {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func demoBlueprint(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "blueprints", "demo.yaml")
}

// ready is what the command reports once it has pulled the demo image.
type ready struct {
	pid       int
	ref       string // the image, on the registry demoenv started
	blueprint string // the copy demoenv handed the command
}

// startDemoenv runs demoenv around command until release exists, and returns it with the
// command's report.
func startDemoenv(t *testing.T, release string) (*exec.Cmd, ready) {
	t.Helper()
	bp := demoBlueprint(t)
	testbin.Require(t, "docker-registry", registry.AptPackage)
	cmd := exec.Command(os.Args[0], "--blueprint", bp, "--", "env", roleEnv+"=command", os.Args[0], bp, release)
	cmd.Env = append(os.Environ(), roleEnv+"=demoenv")
	// A command left running would hold demoenv's output open; do not wait for it forever.
	cmd.WaitDelay = 2 * time.Second
	stderr := pipeline.NewTailBuffer(4096)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	got := make(chan ready, 1)
	go func() {
		defer close(got)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var r ready
			if _, err := fmt.Sscanf(sc.Text(), "ready %d %s %s", &r.pid, &r.ref, &r.blueprint); err == nil {
				got <- r
			}
		}
	}()
	select {
	case r, ok := <-got:
		if !ok {
			t.Fatalf("demoenv ended before its command pulled the demo image:\n%s", stderr)
		}
		return cmd, r
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not pull the demo image within 30s:\n%s", stderr)
	}
	return nil, ready{}
}

// Two demo environments at once: each serves its own registry on its own port, and each
// command reaches it through its blueprint copy.
func TestTwoDemoEnvironmentsAtOnce(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	a, ra := startDemoenv(t, release)
	b, rb := startDemoenv(t, release)
	hostA, hostB := strings.Split(ra.ref, "/")[0], strings.Split(rb.ref, "/")[0]
	if hostA == hostB || hostA == DemoRegistry || hostB == DemoRegistry {
		t.Fatalf("both demos serve on %s and %s", hostA, hostB)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{a, b} {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("demoenv: %v", err)
		}
	}
	for _, r := range []ready{ra, rb} {
		if _, err := os.Stat(filepath.Dir(r.blueprint)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("demoenv left %s behind: %v", filepath.Dir(r.blueprint), err)
		}
	}
}

// kill -9 of demoenv leaves no command, no registry, and (after the next registry start)
// no registry directory behind.
func TestKilledDemoenvLeavesNothingBehind(t *testing.T) {
	cmd, r := startDemoenv(t, filepath.Join(t.TempDir(), "never"))
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	testbin.WaitExited(t, r.pid, 5*time.Second)
	url := "http://" + strings.Split(r.ref, "/")[0] + "/v2/"
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url)
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the registry at %s still answers after demoenv was killed", url)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dir := filepath.Dir(r.blueprint)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed registry's directory is not there to reap: %v", err)
	}
	registry.StartT(t, registry.Options{})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the next registry start left %s behind: %v", dir, err)
	}
}

func TestDeriveBlueprint(t *testing.T) {
	orig := demoBlueprint(t)
	dir := t.TempDir()
	out, err := deriveBlueprint(orig, "127.0.0.1:40001", dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := blueprints.LoadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	got, err := blueprints.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(out) != dir || got.Resolved.ISO != want.Resolved.ISO || got.Resolved.Butane[0] != want.Resolved.Butane[0] {
		t.Fatalf("the copy %s does not name the original's files: %+v, want %+v", out, got.Resolved, want.Resolved)
	}
	if img := got.Spec.ExtraImages[0]; img != "127.0.0.1:40001/"+DemoImage {
		t.Fatalf("extra image %s, want it on the demo's registry", img)
	}

	// A blueprint that names no image on the demo registry has nothing demoenv can serve.
	other := filepath.Join(t.TempDir(), "other.yaml")
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(DemoRegistry, "quay.io",
		"../build/conformance/conformance.iso", want.Resolved.ISO,
		"demo/motd.bu", want.Resolved.Butane[0]).Replace(string(b))
	if err := os.WriteFile(other, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := deriveBlueprint(other, "127.0.0.1:40001", dir); err == nil || !strings.Contains(err.Error(), "names no extra image on "+DemoRegistry) {
		t.Fatalf("got %v, want a refusal naming %s", err, DemoRegistry)
	}
}

// A command that does not name the blueprint would build the original, whose registry
// nobody serves: refuse it before starting anything.
func TestCommandMustNameTheBlueprint(t *testing.T) {
	code, err := run(context.Background(), []string{"--blueprint", demoBlueprint(t), "--", "true", "other.yaml"})
	if code != 2 || err == nil || !strings.Contains(err.Error(), "does not name the blueprint") {
		t.Fatalf("got %d, %v", code, err)
	}
}
