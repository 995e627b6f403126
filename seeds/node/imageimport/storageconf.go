package imageimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containers/storage"
	storagetypes "github.com/containers/storage/types"
)

// storageConfs are where containers/storage looks for its configuration, first found wins
// (containers/storage types/options_linux.go: defaultOverrideConfigFile, then
// SystemConfigFile; types/options.go loadDefaultStoreOptions). The MCO writes the first
// (templates/common/_base/files/container-storage.yaml); CRI-O and podman read it.
var storageConfs = []string{"/etc/containers/storage.conf", "/usr/share/containers/storage.conf"}

// Built-in roots when no storage.conf exists (containers/storage types/options_linux.go
// defaultRunRoot, defaultGraphRoot).
const (
	defaultGraphRoot = "/var/lib/containers/storage"
	defaultRunRoot   = "/run/containers/storage"
)

// StorageReport says which store the import wrote to, and from what configuration.
type StorageReport struct {
	// Config is the node's storage.conf the settings came from ("" for none: built-in
	// defaults, or the caller's options alone).
	Config        string   `json:"config,omitempty"`
	Driver        string   `json:"driver"`
	GraphRoot     string   `json:"graphRoot"`
	RunRoot       string   `json:"runRoot"`
	DriverOptions []string `json:"driverOptions,omitempty"`
	// Dropped are storage.conf's driver options left out because Options.Driver chose
	// another driver than the one they were written for.
	Dropped []string `json:"droppedOptions,omitempty"`
}

// storeOptions are the options CRI-O would open the node's store with: the node's
// storage.conf read as containers/storage reads it (types.ReloadConfigurationFile: driver,
// roots, mountopt, additionalimagestores and the rest), every path taken below opts.Root,
// then opts' own GraphRoot, RunRoot and Driver on top.
func storeOptions(opts Options) (so storage.StoreOptions, rep StorageReport, err error) {
	if opts.Root != "" {
		for _, conf := range storageConfs {
			p := filepath.Join(opts.Root, conf)
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return so, rep, fmt.Errorf("reading the node's storage configuration: %w", err)
			}
			if err := storagetypes.ReloadConfigurationFile(p, &so); err != nil {
				return so, rep, fmt.Errorf("reading the node's storage configuration %s: %w", p, err)
			}
			rep.Config = conf
			break
		}
		if so.GraphRoot == "" {
			so.GraphRoot = defaultGraphRoot
		}
		if so.RunRoot == "" {
			so.RunRoot = defaultRunRoot
		}
		rootPaths(&so, opts.Root)
	}
	if opts.Driver != "" && opts.Driver != so.GraphDriverName {
		// storage.conf's driver options are written for its driver ("overlay.mountopt=..."),
		// and another driver refuses them.
		rep.Dropped, so.GraphDriverOptions = so.GraphDriverOptions, nil
		so.GraphDriverName = opts.Driver
	}
	if opts.GraphRoot != "" {
		so.GraphRoot = opts.GraphRoot
	}
	if opts.RunRoot != "" {
		so.RunRoot = opts.RunRoot
	}
	if so.GraphRoot == "" || so.RunRoot == "" {
		return so, rep, errors.New("no containers-storage to import into: give the node's root (its storage.conf) or a graph root and a run root")
	}
	rep.Driver, rep.GraphRoot, rep.RunRoot, rep.DriverOptions = so.GraphDriverName, so.GraphRoot, so.RunRoot, so.GraphDriverOptions
	return so, rep, nil
}

// rootPaths moves the store's paths, node paths in storage.conf, below root.
func rootPaths(so *storage.StoreOptions, root string) {
	so.GraphRoot = filepath.Join(root, so.GraphRoot)
	so.RunRoot = filepath.Join(root, so.RunRoot)
	if so.ImageStore != "" {
		so.ImageStore = filepath.Join(root, so.ImageStore)
	}
	for i, o := range so.GraphDriverOptions {
		k, v, ok := strings.Cut(o, "=")
		if ok && (strings.HasSuffix(k, ".imagestore") || strings.HasSuffix(k, ".additionallayerstore")) && filepath.IsAbs(v) {
			so.GraphDriverOptions[i] = k + "=" + filepath.Join(root, v)
		}
	}
}
