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
	var o conformance.Options
	flag.StringVar(&o.Out, "o", "build/conformance/conformance.iso", "ISO to write")
	flag.StringVar(&o.AgentBinary, "agent", "", "static snofactory binary to embed (default: build ./cmd/snofactory)")
	flag.StringVar(&o.Kernel, "kernel", "", "kernel image (default: newest /boot/vmlinuz-*)")
	flag.BoolVar(&o.Force, "force", false, "rebuild even if the cached ISO is up to date")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	res, err := conformance.Build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-conformance-iso:", err)
		os.Exit(1)
	}
	fmt.Println(res.ISO)
}
