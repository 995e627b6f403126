package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/snofactory/snofactory/test/registry"
)

// RegistryEnv names the demo registry's address (127.0.0.1:PORT) in the command's
// environment.
const RegistryEnv = "DEMO_REGISTRY"

// DemoImage is the repository and tag of the demo's extra image, under the registry address.
const DemoImage = "demo/hello:1.0"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "demoenv:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("demoenv", flag.ContinueOnError)
	blueprint := fs.String("blueprint", "", "the demo blueprint, naming its registry as "+DemoRegistry)
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() == 0 || *blueprint == "" {
		return 2, errors.New("usage: demoenv --blueprint FILE -- COMMAND [ARGS...] (ARGS name FILE)")
	}
	command, ok := replaceArg(fs.Args(), *blueprint, "")
	if !ok {
		return 2, fmt.Errorf("the command does not name the blueprint %s", *blueprint)
	}
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		return 1, fmt.Errorf("starting the demo registry: %w", err)
	}
	defer reg.Stop()
	ref := reg.Ref(DemoImage)
	if err := pushDemoImage(ctx, ref); err != nil {
		return 1, err
	}
	derived, err := deriveBlueprint(*blueprint, reg.Addr(), reg.Dir())
	if err != nil {
		return 1, err
	}
	command, _ = replaceArg(fs.Args(), *blueprint, derived)
	fmt.Fprintf(os.Stderr, "demoenv: registry on %s serving %s; blueprint %s\n", reg.Addr(), ref, derived)
	// The command finds the registry (and the seed the blueprint pushes there) by name.
	return runCommand(ctx, command, RegistryEnv+"="+reg.Addr())
}

// replaceArg returns args with every element equal to old replaced by repl, and whether
// there was one.
func replaceArg(args []string, old, repl string) ([]string, bool) {
	out := append([]string(nil), args...)
	found := false
	for i, a := range out {
		if a == old {
			out[i], found = repl, true
		}
	}
	return out, found
}

// runCommand runs the command and returns its exit code. It dies with demoenv, even with
// a SIGKILL that runs no cleanup: the kernel sends it the parent-death signal when the
// thread that started it ends, so it is started and waited for on one locked thread.
func runCommand(ctx context.Context, args []string, env ...string) (int, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Ctrl-C reaches the command through the terminal's process group; on SIGTERM we pass it on.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- cmd.Run()
	}()
	err := <-done
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// pushDemoImage pushes a one-layer image whose content is fixed, so its digest (and with it
// the demo's lock) is the same on every machine.
func pushDemoImage(ctx context.Context, ref string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := []byte("hello from the snofactory demo\n")
	tw.WriteHeader(&tar.Header{Name: "etc/snofactory-demo/hello.txt", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	tw.Write(content)
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
