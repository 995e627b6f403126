package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

// ignitionResultFile is Ignition's record of the boot that provisioned the node: the
// factory's boot ID (random) and time, which no site needs.
const ignitionResultFile = "/etc/.ignition-result.json"

// ignitionResultAction removes Ignition's record of the factory boot from a coreos seed.
// (An OpenShift seal follows lifecycle-agent, which keeps it.)
func (s Sealer) ignitionResultAction() sealAction {
	return sealAction{steps.Step{Name: "ignition-result", Changes: []string{ignitionResultFile},
		Detail: "removed: it records the factory boot's random ID and time"}, func(context.Context) (string, error) {
		// Overwritten first: a freed block keeps its bytes in the seed's disk.
		err := shred(s.under(ignitionResultFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "none on the node", nil
		case err != nil:
			return "", fmt.Errorf("removing %s: %w", ignitionResultFile, err)
		}
		return "removed " + ignitionResultFile, nil
	}}
}

// clampTimesAction sets every file time of the root and the boot directory later than the
// build's source date to it, as reproducible builds clamp mtimes.
func (s Sealer) clampTimesAction() sealAction {
	date := time.Unix(s.Request.SourceDateEpoch, 0).UTC()
	dirs := []string{s.Root}
	if s.BootDir != "" {
		dirs = append(dirs, s.BootDir)
	}
	return sealAction{steps.Step{Name: "clamp-times", Changes: []string{"/"},
		Detail: "access and modification times later than SOURCE_DATE_EPOCH set to it"}, func(context.Context) (string, error) {
		n, immutable, err := clampTimes(dirs, date)
		if err != nil {
			return "", err
		}
		detail := fmt.Sprintf("%d files' times clamped to %s", n, date.Format(time.RFC3339))
		if len(immutable) > 0 {
			detail += "; immutable, left as they are: " + strings.Join(immutable, ", ")
		}
		return detail, nil
	}}
}

// clampTimes sets the access and modification times later than t of every file under
// dirs (symbolic links themselves, not their targets) to t, and returns how many files it
// changed and the immutable ones it left (extlinux makes its ldlinux.sys immutable, so
// that nothing moves the blocks its boot sector points at). It stays on each directory's
// file system: the live system's /proc, /dev or /run bound into a root are not the node's
// files. Change times cannot be set: the kernel stamps them.
func clampTimes(dirs []string, t time.Time) (n int, immutable []string, err error) {
	ts := unix.NsecToTimespec(t.UnixNano())
	for _, dir := range dirs {
		top, err := os.Lstat(dir)
		if err != nil {
			return n, immutable, fmt.Errorf("clamping file times: %w", err)
		}
		dev := top.Sys().(*syscall.Stat_t).Dev
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			if st.Dev != dev {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			atime, mtime := unix.Timespec(st.Atim), unix.Timespec(st.Mtim)
			if later(atime, ts) || later(mtime, ts) {
				times := []unix.Timespec{earlier(atime, ts), earlier(mtime, ts)}
				switch err := unix.UtimesNanoAt(unix.AT_FDCWD, p, times, unix.AT_SYMLINK_NOFOLLOW); {
				case errors.Is(err, unix.EPERM):
					immutable = append(immutable, p)
				case err != nil:
					return fmt.Errorf("clamping the times of %s: %w", p, err)
				default:
					n++
				}
			}
			return nil
		})
		if err != nil {
			return n, immutable, err
		}
	}
	return n, immutable, nil
}

func later(a, b unix.Timespec) bool { return a.Nano() > b.Nano() }

func earlier(a, b unix.Timespec) unix.Timespec {
	if later(a, b) {
		return b
	}
	return a
}
