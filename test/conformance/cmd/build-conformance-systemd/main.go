// Command build-conformance-systemd builds the systemd conformance OS (conformance.BuildSystemd)
// and the same OS installable as RHCOS is (conformance.BuildSystemdLive: its metal image and
// live ISO, which the default site test installs through the demo pipeline), and prints the
// root image's path.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/snofactory/snofactory/test/conformance"
)

func main() {
	var o conformance.SystemdOptions
	flag.StringVar(&o.Dir, "o", conformance.DefaultSystemdDir, "directory to write vmlinuz, initrd.img and root.img to")
	flag.StringVar(&o.AgentBinary, "agent", "", "static snofactory binary to install (default: build ./cmd/snofactory)")
	flag.StringVar(&o.Kernel, "kernel", "", "kernel image (default: newest /boot/vmlinuz-*)")
	flag.StringVar(&o.Mirror, "mirror", "", "Debian mirror (default: $DEBIAN_MIRROR, else http://deb.debian.org/debian)")
	flag.BoolVar(&o.Force, "force", false, "rebuild the root image even if it is up to date")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	res, err := conformance.BuildSystemd(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-conformance-systemd:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "build-conformance-systemd: packages %s, whole build %s, cached %v\n",
		res.PackagesDuration.Round(1e9), res.Duration.Round(1e9), res.Cached)
	live, err := conformance.BuildSystemdLive(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-conformance-systemd: the live ISO:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "build-conformance-systemd: live ISO %s in %s, cached %v\n", live.ISO, live.Duration.Round(1e9), live.Cached)
	fmt.Println(res.Root)
}
