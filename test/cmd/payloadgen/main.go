package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "payloadgen:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// summary is what payloadgen prints (as JSON) when it is done.
type summary struct {
	Release         string   `json:"release"`
	Tag             string   `json:"tag"`
	Version         string   `json:"version"`
	Registry        string   `json:"registry"`
	Components      int      `json:"components"`
	UniqueBlobs     int      `json:"uniqueBlobs"`
	UniqueBlobBytes int64    `json:"uniqueBlobBytes"`
	TotalBlobBytes  int64    `json:"totalBlobBytes"`
	ISOLocation     string   `json:"isoLocation"`
	ISOSHA256       string   `json:"isoSHA256"`
	Seconds         float64  `json:"seconds"`
	ComponentList   []string `json:"componentList,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("payloadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		reg        = fs.String("registry", "", "registry host:port to push to (plain HTTP); required unless --serve")
		serve      = fs.Bool("serve", false, "start a throwaway registry, push there and keep it up until interrupted")
		components = fs.Int("components", 0, "number of component images, 8-150 (default 60; 40 with --size tiny)")
		size       = fs.String("size", "small", "layer sizes: tiny, small or medium")
		seed       = fs.Int64("seed", 1, "content seed; the same flags give the same digests")
		version    = fs.String("version", "", "release version (default 4.18.0-synthetic)")
		iso        = fs.String("iso", "", "boot ISO: a local file (hashed and put in machine-os-images) or a URL")
		isoSum     = fs.String("iso-sha256", "", "sha256 of a --iso URL")
		format     = fs.String("format", "mixed", "manifest media types: docker, oci or mixed")
		multiArch  = fs.Bool("multi-arch", false, "push the pod component as a linux/amd64+arm64 index")
		refReg     = fs.String("reference-registry", "", "registry host written into image-references (default: --registry)")
		jobs       = fs.Int("jobs", 4, "parallel uploads")
		list       = fs.Bool("list", false, "include every component pull spec in the output")
		verbose    = fs.Bool("v", false, "log progress to stderr")
	)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if (*reg == "") == !*serve {
		return fmt.Errorf("%w: give exactly one of --registry or --serve", errUsage)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	opts := payload.Options{
		Components: *components, Size: payload.Size(*size), Seed: *seed, Version: *version,
		Format: payload.Format(*format), MultiArch: *multiArch, ReferenceRegistry: *refReg,
		Jobs: *jobs, Logger: logger,
	}
	if strings.Contains(*iso, "://") {
		opts.ISO = payload.ISO{Location: *iso, SHA256: *isoSum}
	} else {
		opts.ISO = payload.ISO{Path: *iso, SHA256: *isoSum}
	}

	addr := *reg
	if *serve {
		r, err := registry.Start(ctx, registry.Options{Logger: logger})
		if err != nil {
			return err
		}
		defer r.Stop()
		addr = r.Addr()
	}
	rel, err := payload.Generate(ctx, addr, opts)
	if err != nil {
		return err
	}
	s := summary{
		Release: rel.PullSpec, Tag: rel.Tag, Version: rel.Version, Registry: rel.Registry,
		Components: len(rel.Components), UniqueBlobs: rel.UniqueBlobs,
		UniqueBlobBytes: rel.UniqueBlobBytes, TotalBlobBytes: rel.TotalBlobBytes,
		ISOLocation: rel.ISOLocation, ISOSHA256: rel.ISOSHA256, Seconds: rel.Elapsed.Seconds(),
	}
	if *list {
		for _, c := range rel.Components {
			s.ComponentList = append(s.ComponentList, c.Name+" "+c.PullSpec)
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	if *serve {
		fmt.Fprintf(stderr, "registry %s serving the payload; interrupt to stop\n", addr)
		<-ctx.Done()
	}
	return nil
}
