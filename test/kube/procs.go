package kube

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// proc is a server process the cluster started, in its own process group.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startProc runs bin in its own process group, logging to dir/name.log. The kernel kills
// it if the test process dies first (Pdeathsig), so a crashed test leaves no server.
func startProc(dir, name, bin string, env []string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	log, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.cmd.Wait(); log.Close(); close(p.done) }()
	return p, nil
}

// stop asks the process group to end and kills it if it has not within grace.
func (p *proc) stop(grace time.Duration) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

// killAndWait kills pid and waits for it to be gone through a pidfd (an event, not a
// poll): processes the shims and runc started are not our children.
func killAndWait(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("killing %d: %w", pid, err)
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// pidsMatching lists the processes whose command line or environment contains marker.
func pidsMatching(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if bytes.Contains(b, []byte(marker)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// cgroupControllers are the cgroup v1 hierarchies under /sys/fs/cgroup (or the unified
// one on v2), where the kubelet's cgroupfs driver makes its cgroups.
func cgroupControllers() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	var dirs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if fi, err := os.Lstat(filepath.Join("/sys/fs/cgroup", e.Name())); err == nil && fi.IsDir() {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), "cgroup.procs")); err == nil {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	return dirs
}

// makeCgroup makes the cgroup root in every hierarchy. A new v1 cpuset cgroup starts with
// no CPUs and no memory nodes, so those are copied from the parent, as the kernel's
// cgroup.clone_children would.
func makeCgroup(root string) error {
	for _, ctl := range cgroupControllers() {
		dir := filepath.Join(ctl, root)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("making the kubelet's cgroup root: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(ctl, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return fmt.Errorf("setting %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// cgroupPids lists every process in the cgroup tree root of any hierarchy.
func cgroupPids(root string) []int {
	var pids []int
	for _, c := range cgroupControllers() {
		filepath.WalkDir(filepath.Join(c, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the cgroup tree root in every hierarchy, deepest first.
func removeCgroups(root string) error {
	var errs []error
	for _, c := range cgroupControllers() {
		var dirs []string
		filepath.WalkDir(filepath.Join(c, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, deepest (last mounted) first.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append([]string{f[4]}, mounts...)
		}
	}
	return mounts
}

func unmountUnder(dir string) error {
	var errs []error
	for _, m := range mountsUnder(dir) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}
