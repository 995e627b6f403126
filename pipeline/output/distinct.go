package output

import (
	"fmt"
	"os"
	"path/filepath"
)

// Named is an output path and the flag (or argument) that names it, for messages.
type Named struct {
	Flag, Path string
}

// CheckAll refuses, before a command does any work, any of outs that Check refuses (none
// may be one of inputs) and any two of outs that are the same file: the same path once
// made absolute, the same path once symlinks in it are resolved, or, where both exist, the
// same device and inode (a hard link). Two outputs on one file would have the second
// replace the first while both are reported written. Empty paths are skipped. A refusal
// names the flags and the rule.
func CheckAll(outs []Named, inputs ...string) error {
	for _, o := range outs {
		if err := CheckFile(o.Flag, o.Path, inputs...); err != nil {
			return err
		}
	}
	for i, a := range outs {
		for _, b := range outs[i+1:] {
			if a.Path == "" || b.Path == "" || !SameFile(a.Path, b.Path) {
				continue
			}
			return &Error{Path: b.Path, Problem: fmt.Sprintf("%s names the same file as %s %s; each output needs a file of its own",
				b.Flag, a.Flag, a.Path)}
		}
	}
	return nil
}

// SameFile tells whether paths a and b, existing or about to be written, are one file.
func SameFile(a, b string) bool {
	if ra, rb := resolved(a), resolved(b); ra == rb {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// resolved is path made absolute with the symlinks in it (and, for a path that does not
// exist yet, in its directory) resolved; as clean an absolute path as can be had otherwise.
func resolved(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	// A dangling symlink counts as what it points to: the user named that file.
	for hops := 0; hops < 40; hops++ {
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			return r
		}
		target, err := os.Readlink(abs)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		abs = filepath.Clean(target)
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// CheckApart refuses two directories of one command (a and b, each named by its flag) that
// are the same directory, or one inside the other: what is written into one would land in,
// or be cleaned out of, the other (a build's output directory inside its cache, a cache
// inside an output directory a depot rewrites). Paths are compared once made absolute with
// their symlinks resolved, as far as they exist; an empty path is skipped.
func CheckApart(a, b Named) error {
	if a.Path == "" || b.Path == "" {
		return nil
	}
	ra, rb := resolvedDir(a.Path), resolvedDir(b.Path)
	switch {
	case SameFile(a.Path, b.Path):
		return &Error{Path: b.Path, Problem: fmt.Sprintf("%s is the same directory as %s %s; give each its own", b.Flag, a.Flag, a.Path)}
	case inside(ra, rb):
		return &Error{Path: b.Path, Problem: fmt.Sprintf("%s is inside %s %s; give each a directory of its own, neither inside the other", b.Flag, a.Flag, a.Path)}
	case inside(rb, ra):
		return &Error{Path: b.Path, Problem: fmt.Sprintf("%s holds %s %s; give each a directory of its own, neither inside the other", b.Flag, a.Flag, a.Path)}
	}
	return nil
}

// resolvedDir is path made absolute with the symlinks of its nearest existing ancestor
// resolved: a directory a command is about to create may be several levels deep.
func resolvedDir(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		if p == filepath.Dir(p) {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// inside tells whether path lies below dir (both resolved).
func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}
