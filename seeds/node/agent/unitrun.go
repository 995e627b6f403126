package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// UnitRunner starts the enabled units of an installed root on a node that has no
// systemd (the conformance OS): each unit's ExecStartPre, ExecStart and ExecStartPost
// lines run in order with `sh -c`, chrooted into Root when Root has a /bin/sh (the
// installed conformance OS does: its installer puts busybox there, so a unit's scripts
// find /bin/sh and the paths Ignition wrote), else with the runner's own /bin/sh in
// Root as working directory. Output goes to LogDir/NAME.log.
//
// A command that exits non-zero fails its unit (unless systemd's "-" prefix says to
// ignore it). oneshot and forking units are waited for; simple, exec, idle, notify and
// dbus units count as started once they have run for Grace without failing, and are
// left running, as systemd leaves a service running.
type UnitRunner struct {
	Root   string
	LogDir string // a host path, usually under Root
	// Grace is how long a long-running service must survive; zero means 2s.
	Grace time.Duration
}

// UnitResult says how one unit ended.
type UnitResult struct {
	Unit   string
	Status UnitStatus
	Log    string // the unit's output file
	Err    error  // set when Status is UnitFailed
}

// UnitStatus is what became of a unit.
type UnitStatus string

// Unit outcomes.
const (
	UnitOK      UnitStatus = "ok"      // every command exited 0
	UnitRunning UnitStatus = "running" // a service still running after the grace time
	UnitFailed  UnitStatus = "failed"
	UnitSkipped UnitStatus = "skipped" // enabled, but no unit file or no command here
)

// Run starts units in order and stops at the first failure, which it returns with
// the results so far (the failed one last).
func (r UnitRunner) Run(ctx context.Context, units []Unit) ([]UnitResult, error) {
	if err := os.MkdirAll(r.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("unit log directory: %w", err)
	}
	var out []UnitResult
	for _, u := range units {
		res := r.runUnit(ctx, u)
		out = append(out, res)
		if res.Status == UnitFailed {
			return out, res.Err
		}
	}
	return out, nil
}

func (r UnitRunner) runUnit(ctx context.Context, u Unit) UnitResult {
	res := UnitResult{Unit: u.Name, Log: filepath.Join(r.LogDir, u.Name+".log")}
	if u.Path == "" || len(u.ExecStart) == 0 {
		res.Status = UnitSkipped
		return res
	}
	logf, err := os.OpenFile(res.Log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		res.Status, res.Err = UnitFailed, fmt.Errorf("unit %s: output log: %w", u.Name, err)
		return res
	}
	defer logf.Close()
	res.Status = UnitOK
	waitAll := u.Type == "oneshot" || u.Type == "forking"
	steps := []struct {
		lines []string
		wait  bool
	}{{u.ExecStartPre, true}, {u.ExecStart, waitAll}, {u.ExecStartPost, true}}
	for _, st := range steps {
		for _, line := range st.lines {
			status, err := r.exec(ctx, u, line, logf, st.wait)
			if err != nil {
				res.Status, res.Err = UnitFailed, fmt.Errorf("unit %s: %w (output in %s)", u.Name, err, res.Log)
				return res
			}
			if status == UnitRunning {
				res.Status = UnitRunning
			}
		}
	}
	return res
}

// exec runs one command line of u, its output appended to logf. With wait false it
// returns UnitRunning if the command is still running after the grace time.
func (r UnitRunner) exec(ctx context.Context, u Unit, line string, logf *os.File, wait bool) (UnitStatus, error) {
	cmdline := strings.TrimLeft(line, "-@+!:")
	ignore := strings.Contains(line[:len(line)-len(cmdline)], "-")
	fmt.Fprintf(logf, "+ %s\n", cmdline)
	cmd := exec.Command("/bin/sh", "-c", cmdline)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, u.Environment...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if st, err := os.Stat(filepath.Join(r.Root, "bin", "sh")); err == nil && st.Mode().IsRegular() {
		cmd.SysProcAttr.Chroot = r.Root
		cmd.Dir = "/"
	} else {
		cmd.Dir = r.Root
	}
	if err := cmd.Start(); err != nil {
		return UnitFailed, fmt.Errorf("starting %q: %w", cmdline, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if !wait {
		grace := r.Grace
		if grace == 0 {
			grace = 2 * time.Second
		}
		timeout = time.After(grace)
	}
	select {
	case err := <-done:
		if err != nil && !ignore {
			return UnitFailed, fmt.Errorf("%q: %w", cmdline, err)
		}
		return UnitOK, nil
	case <-timeout:
		return UnitRunning, nil // a service: it keeps running, its output still logged
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return UnitFailed, fmt.Errorf("%q: %w", cmdline, ctx.Err())
	}
}
