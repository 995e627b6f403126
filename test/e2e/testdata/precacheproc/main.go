package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/stages/precache"
)

func main() {
	store := flag.String("store", "", "blob store directory")
	lock := flag.String("lock", "", "lock.json")
	confDir := flag.String("registries-d", "", "registries.conf.d with mirrors and insecure registries")
	jobs := flag.Int("jobs", 4, "parallel transfers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *store, *lock, *confDir, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "precacheproc:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, storeDir, lock, confDir string, jobs int) error {
	images, err := precache.ReadImages(lock)
	if err != nil {
		return err
	}
	st, err := blobstore.Open(storeDir)
	if err != nil {
		return err
	}
	sys := &types.SystemContext{SystemRegistriesConfPath: "/dev/null", SystemRegistriesConfDirPath: confDir}
	sysregistriesv2.InvalidateCache()
	res, err := precache.Precache(ctx, precache.Config{
		Images: images, Store: st, Sys: sys, Jobs: jobs, RetryBase: 1,
		Progress: func(what string, done, total int64, unit string) {
			if what == "bytes" {
				fmt.Printf("progress %d %d\n", done, total)
			}
		},
	})
	if err != nil {
		return err
	}
	b, _ := json.Marshal(res.Report)
	fmt.Println("report " + strings.TrimSpace(string(b)))
	return nil
}
