package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

// testImage is the tag this test builds: not make image's default, so that the test leaves a
// developer's image alone. It stays in the store after the test (with the base and the package
// layers, which the next run reuses); the test removes the one its build replaced.
const testImage = "localhost/snofactory:image-test"

// The first build on a machine makes the Debian base (mmdebstrap, a few minutes on 2 busy
// cores) and the package layers; later builds reuse both and take seconds.
const buildTimeout = 20 * time.Minute

func TestImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: building the image needs root (mmdebstrap and buildah's chroot builds create files owned by other users; rootless buildah needs subuid/subgid ranges that make deps does not set up); make test runs as root")
	}
	for tool, pkg := range map[string]string{"buildah": "buildah", "mmdebstrap": "mmdebstrap", "make": "make", "git": "git"} {
		testbin.Require(t, tool, pkg)
	}
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()

	// make image labels the image from git; a commit landing meanwhile may change the answer.
	describe := []string{"git", "describe", "--tags", "--always", "--dirty"}
	revBefore := strings.TrimSpace(run(t, ctx, root, "git", "rev-parse", "HEAD"))
	descBefore := strings.TrimSpace(run(t, ctx, root, describe[0], describe[1:]...))
	previous := imageID(ctx, testImage)

	start := time.Now()
	// Exactly what a depot runs; IMAGE only renames the result.
	out := run(t, ctx, root, "make", "--no-print-directory", "image", "IMAGE="+testImage)
	t.Logf("make image: %s", time.Since(start).Round(time.Second))
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "base: ") { // what build-base.sh did
			t.Log(l)
		}
	}
	removeReplaced(t, ctx, previous)
	if !strings.Contains(out, "localhost/snofactory-base:bookworm") {
		t.Errorf("make image did not build on the local base image; output:\n%s", tail(out, 20))
	}
	revAfter := strings.TrimSpace(run(t, ctx, root, "git", "rev-parse", "HEAD"))
	descAfter := strings.TrimSpace(run(t, ctx, root, describe[0], describe[1:]...))

	t.Run("config", func(t *testing.T) {
		label := func(k string) string {
			return strings.TrimSpace(run(t, ctx, "", "buildah", "inspect", "--type", "image",
				"--format", fmt.Sprintf("{{index .OCIv1.Config.Labels %q}}", k), testImage))
		}
		if rev := label("org.opencontainers.image.revision"); rev != revBefore && rev != revAfter {
			t.Errorf("revision label %q, want git HEAD %s", rev, revBefore)
		}
		if v := label("org.opencontainers.image.version"); v != descBefore && v != descAfter {
			t.Errorf("version label %q, want %q (git describe --tags --always --dirty)", v, descBefore)
		}
		if src := label("org.opencontainers.image.source"); !strings.HasPrefix(src, "https://") {
			t.Errorf("source label %q, want a URL", src)
		}
		cfg := run(t, ctx, "", "buildah", "inspect", "--type", "image",
			"--format", "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}", testImage)
		if want := "10001 [/usr/local/bin/snofactory]"; strings.TrimSpace(cfg) != want {
			t.Errorf("user and entrypoint %q, want %q", strings.TrimSpace(cfg), want)
		}
	})

	ctr := "snofactory-image-test-" + fmt.Sprint(os.Getpid())
	run(t, ctx, "", "buildah", "from", "--pull=never", "--name", ctr, testImage)
	t.Cleanup(func() {
		// A fresh context: the test's may be done, and the container must go either way.
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cmdOutput(c, "", "buildah", "rm", ctr); err != nil {
			t.Errorf("removing container %s: %v", ctr, err)
		}
	})
	// inside runs argv in the image as its user (snofactory), with the image's PATH and
	// working directory; mounts are buildah's -v SRC:DST[:ro].
	inside := func(mounts []string, argv ...string) (string, error) {
		args := []string{"run", "--isolation", "chroot"}
		for _, m := range mounts {
			args = append(args, "-v", m)
		}
		args = append(append(args, ctr, "--"), argv...)
		return cmdOutput(ctx, "", "buildah", args...)
	}

	t.Run("version", func(t *testing.T) {
		out, err := inside(nil, "snofactory", "version")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "snofactory ") || !strings.HasPrefix(lines[1], "go go1.") || !strings.HasSuffix(lines[1], " linux/amd64") {
			t.Fatalf("snofactory version printed %q, want \"snofactory VERSION\" then \"go GOVERSION linux/amd64\"", out)
		}
		// The image carries the binary make image built: it says the same as that one.
		if host := run(t, ctx, root, filepath.Join(root, "build", "snofactory"), "version"); out != host {
			t.Errorf("snofactory version in the image printed %q, build/snofactory printed %q", out, host)
		}
	})

	t.Run("validate", func(t *testing.T) {
		// The blueprints are the depot's input, not part of the tool: they are mounted, as a
		// Tekton workspace or a depot directory would be.
		bp := filepath.Join(root, "blueprints")
		out, err := inside([]string{bp + ":/blueprints:ro"}, "snofactory", "validate", "/blueprints/demo.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != "/blueprints/demo.yaml: ok" {
			t.Fatalf("validate printed %q, want \"/blueprints/demo.yaml: ok\"", out)
		}

		// A broken blueprint fails inside the image as it does outside: exit 2 and the
		// problem's position.
		dir := t.TempDir()
		bad := "apiVersion: snofactory.io/v1alpha1\nkind: Blueprint\nmetadata:\n  name: x\nspec:\n  target:\n    type: nope\n"
		if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil { // readable by the image's user
			t.Fatal(err)
		}
		out, err = inside([]string{dir + ":/in:ro"}, "snofactory", "validate", "/in/bad.yaml")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("validate of a broken blueprint: %v, want exit status 2; output:\n%s", err, out)
		}
		if !strings.Contains(out, "/in/bad.yaml:7:") {
			t.Errorf("validate output lacks the problem's position /in/bad.yaml:7:\n%s", out)
		}
	})

	t.Run("qemu", func(t *testing.T) {
		out, err := inside(nil, "qemu-system-x86_64", "--version")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^QEMU emulator version \d+\.\d+`).MatchString(out) {
			t.Fatalf("qemu-system-x86_64 --version printed %q", out)
		}
		// A real machine under TCG, as the image's unprivileged user: SeaBIOS starts, finds
		// no boot disk and, with a zero reboot timeout and -no-reboot, qemu exits.
		out, err = inside(nil, "timeout", "120", "qemu-system-x86_64",
			"-accel", "tcg", "-machine", "pc", "-m", "64", "-nodefaults", "-no-user-config",
			"-display", "none", "-no-reboot", "-boot", "reboot-timeout=0",
			"-chardev", "stdio,id=dbg", "-device", "isa-debugcon,iobase=0x402,chardev=dbg")
		if err != nil {
			t.Fatalf("qemu TCG boot: %v\n%s", err, tail(out, 20))
		}
		for _, want := range []string{"SeaBIOS (version", "No bootable device"} {
			if !strings.Contains(out, want) {
				t.Fatalf("firmware log lacks %q:\n%s", want, tail(out, 20))
			}
		}
	})

	t.Run("tools", func(t *testing.T) {
		// What the stages run besides qemu: qemu-img (disks, overlays, seed conversion),
		// xorriso (live ISO rebuilds) and the OVMF firmware the VM config looks for; and the
		// user's kvm group for /dev/kvm.
		script := `set -e
qemu-img create -q -f qcow2 /tmp/probe.qcow2 16M
qemu-img info /tmp/probe.qcow2 | grep '^file format:'
rm /tmp/probe.qcow2
xorriso -version 2>&1 | head -n 1
test -r /usr/share/OVMF/OVMF_CODE_4M.fd && test -r /usr/share/OVMF/OVMF_VARS_4M.fd && echo ovmf ok
id -un; id -nG`
		out, err := inside(nil, "sh", "-c", script)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{"file format: qcow2", "xorriso 1.", "ovmf ok", "\nsnofactory\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		groups := strings.Fields(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
		if !slices.Contains(groups, "kvm") {
			t.Errorf("user snofactory is in groups %v, want kvm among them", groups)
		}
	})
}

// run runs a command and returns its standard output, failing the test (with the output's
// tail) if it fails.
func run(t *testing.T, ctx context.Context, dir, name string, args ...string) string {
	t.Helper()
	out, err := cmdOutput(ctx, dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out, 40))
	}
	return out
}

// cmdOutput runs a command in its own process group, so that a cancelled or timed-out test
// takes the command's children (buildah's, make's) with it, and returns stdout and stderr
// together.
func cmdOutput(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// imageID is the full ID of image, or "" when the store has no such image.
func imageID(ctx context.Context, image string) string {
	out, err := cmdOutput(ctx, "", "buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", image)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// removeReplaced removes the image the test's tag named before this build, if the build
// replaced it and nothing else uses it (dangling: no name, no child). buildah then removes its
// parents that became dangling with it, down to the first one a newer image still builds on:
// the store keeps one test image and the cached package layers, not one binary per revision.
func removeReplaced(t *testing.T, ctx context.Context, old string) {
	if old == "" || old == imageID(ctx, testImage) {
		return
	}
	out, err := cmdOutput(ctx, "", "buildah", "images", "--all", "--quiet", "--no-trunc", "--filter", "dangling=true")
	if err != nil {
		t.Logf("listing dangling images: %v: %s", err, out)
		return
	}
	if !slices.Contains(strings.Fields(out), old) && !slices.Contains(strings.Fields(out), "sha256:"+old) {
		return
	}
	if out, err := cmdOutput(ctx, "", "buildah", "rmi", old); err != nil {
		t.Logf("removing the replaced image %.12s: %v: %s", old, err, out)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
