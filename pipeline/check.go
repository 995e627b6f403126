package pipeline

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/output"
)

// inputErrorf refuses a build or plan because of what it was asked to do: a selection
// naming no stage or a stage this version cannot run, or a cache or output directory that is
// a file or cannot be written. It is the caller's mistake, not a failed build.
func inputErrorf(format string, args ...any) error { return badinput.Errorf(format, args...) }

// checkAvailable refuses a selection that reaches a stage this version cannot run, naming the
// first such stage and the last stage before it that a build can stop at.
func (g *Graph) checkAvailable(want map[string]bool) error {
	last := ""
	for _, s := range g.Stages {
		if !want[s.Name] {
			continue
		}
		if s.Unavailable == "" {
			last = s.Name
			continue
		}
		if last == "" {
			return inputErrorf("stage %s is unavailable: %s", s.Name, s.Unavailable)
		}
		return inputErrorf("stage %s is unavailable: %s; build with --until %s to stop before it", s.Name, s.Unavailable, last)
	}
	return nil
}

// checkBuild checks everything a build was asked to do before it touches the disk: the graph,
// the selection, and that the output and cache directories are (or can be created as)
// writable directories. It returns the selected stages.
func checkBuild(g *Graph, opts BuildOptions) (map[string]bool, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	want, err := g.selected(opts.Selection)
	if err != nil {
		return nil, err
	}
	if err := g.checkAvailable(want); err != nil {
		return nil, err
	}
	if err := checkDir("output directory", opts.OutputDir, true); err != nil {
		return nil, err
	}
	if err := checkDir("cache directory", opts.Cache.Dir, true); err != nil {
		return nil, err
	}
	if err := checkApart(g.Inputs, opts.OutputDir, opts.Cache.Dir); err != nil {
		return nil, err
	}
	return want, nil
}

// checkApart refuses an output or cache directory that holds one of the build's inputs,
// and output and cache directories that are one, or one inside the other.
func checkApart(inputs []string, outputDir, cacheDir string) error {
	if err := output.CheckDir("the output directory", outputDir, inputs...); err != nil {
		return badinput.Wrap(err)
	}
	if err := output.CheckDir("the cache directory", cacheDir, inputs...); err != nil {
		return badinput.Wrap(err)
	}
	return badinput.Wrap(output.CheckApart(output.Named{Flag: "the output directory", Path: outputDir},
		output.Named{Flag: "the cache directory", Path: cacheDir}))
}

// checkDir refuses a directory argument that cannot be one: a path naming a file (or below
// one) or, with write, a directory this process cannot create files in. A missing directory
// is fine if its nearest existing parent is a directory it may create it in: the caller
// creates it once every argument is known good.
func checkDir(what, dir string, write bool) error {
	if dir == "" {
		return inputErrorf("no %s given", what)
	}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && !fi.IsDir() && p == filepath.Clean(dir):
			return inputErrorf("%s %s is a file, not a directory", what, dir)
		case err == nil && !fi.IsDir():
			return inputErrorf("%s %s: %s is a file, not a directory", what, dir, p)
		case err == nil && !write:
			return nil
		case err == nil:
			// Access, not the mode bits: it answers for this process (root, ACLs) and for
			// read-only mounts alike.
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				return inputErrorf("%s %s: %s is not writable: %w", what, dir, p, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return inputErrorf("%s %s: %w", what, dir, err)
		case filepath.Dir(p) == p:
			return nil
		}
	}
}
