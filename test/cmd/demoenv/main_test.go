package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
// says so on stdout, and waits until its stdin, which demoenv passes through, ends.
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
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "waiting for the release:", err)
		return 1
	}
	return 0
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

// startDemoenv runs demoenv around command, and returns it with the command's report and
// release, which lets the command end (by closing its stdin).
func startDemoenv(t *testing.T) (cmd *exec.Cmd, r ready, release func()) {
	t.Helper()
	bp := demoBlueprint(t)
	testbin.Require(t, "docker-registry", registry.AptPackage)
	cmd = exec.Command(os.Args[0], "--blueprint", bp, "--", "env", roleEnv+"=command", os.Args[0], bp)
	cmd.Env = append(os.Environ(), roleEnv+"=demoenv")
	// The test holds the write end: the command runs until release closes it, or is killed.
	stdin, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	cmd.Stdin = stdin
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
	stdin.Close()
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
	// Give up only shortly before the test binary would, to say why with demoenv's stderr.
	var giveUp <-chan time.Time
	if d, ok := t.Deadline(); ok {
		giveUp = time.After(time.Until(d) - 10*time.Second)
	}
	select {
	case r, ok := <-got:
		if !ok {
			t.Fatalf("demoenv ended before its command pulled the demo image:\n%s", stderr)
		}
		return cmd, r, func() { hold.Close() }
	case <-giveUp:
		t.Fatalf("the command has not pulled the demo image and the test is about to time out:\n%s", stderr)
	}
	return nil, ready{}, nil
}

// Two demo environments at once: each serves its own registry on its own port, and each
// command reaches it through its blueprint copy.
func TestTwoDemoEnvironmentsAtOnce(t *testing.T) {
	a, ra, releaseA := startDemoenv(t)
	b, rb, releaseB := startDemoenv(t)
	hostA, hostB := strings.Split(ra.ref, "/")[0], strings.Split(rb.ref, "/")[0]
	if hostA == hostB || hostA == DemoRegistry || hostB == DemoRegistry {
		t.Fatalf("both demos serve on %s and %s", hostA, hostB)
	}
	releaseA()
	releaseB()
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
	cmd, r, _ := startDemoenv(t)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	testbin.WaitExited(t, r.pid, 5*time.Second)
	// demoenv is reaped, so the kernel has sent the registry its parent-death signal: a
	// killed registry cannot answer, even if its socket has not closed yet.
	url := "http://" + strings.Split(r.ref, "/")[0] + "/v2/"
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("the registry at %s still answers after demoenv was killed", url)
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
