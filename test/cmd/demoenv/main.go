// Command demoenv runs a command with the demo's offline environment around it: a real
// registry (Debian's docker-registry) on 127.0.0.1 holding the demo's extra image. The demo
// blueprint names that image, so `make demo` needs no network.
//
//	demoenv [--port 5055] -- snofactory build blueprints/demo.yaml
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
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/snofactory/snofactory/test/registry"
)

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
	port := fs.Int("port", 5055, "registry port on 127.0.0.1 (the demo blueprint names it)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() == 0 {
		return 2, errors.New("usage: demoenv [--port N] -- COMMAND [ARGS...]")
	}
	reg, err := registry.Start(ctx, registry.Options{Port: *port})
	if err != nil {
		return 1, fmt.Errorf("starting the demo registry on 127.0.0.1:%d (is another one running?): %w", *port, err)
	}
	defer reg.Stop()
	ref := reg.Ref(DemoImage)
	if err := pushDemoImage(ctx, ref); err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "demoenv: registry on %s serving %s\n", reg.Addr(), ref)

	cmd := exec.CommandContext(ctx, fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Ctrl-C reaches the child through the terminal's process group; on SIGTERM we pass it on.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	err = cmd.Run()
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
