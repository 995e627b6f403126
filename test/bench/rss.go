package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

// measurer runs commands through the measure program (test/bench/measure), so that each
// figure is the command's own: its wall time, CPU time and peak RSS.
type measurer struct {
	helper string // the measure binary
}

// newMeasurer builds the measure program into dir.
func newMeasurer(dir string) (*measurer, error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return nil, err
	}
	helper := filepath.Join(dir, "measure")
	cmd := exec.Command("go", "build", "-o", helper, "./test/bench/measure")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the measure program: %v\n%s", err, out)
	}
	return &measurer{helper: helper}, nil
}

// measured is one command's wall time, CPU time (user and system) and peak resident
// memory, its own.
type measured struct {
	wall   time.Duration
	cpu    time.Duration
	rssMiB float64
	out    string
}

// run runs a command to its end and measures it.
func (m *measurer) run(ctx context.Context, name string, args ...string) (measured, error) {
	f, err := os.CreateTemp("", "bench-usage-")
	if err != nil {
		return measured{}, err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd := exec.CommandContext(ctx, m.helper, append([]string{f.Name(), name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	res := measured{out: string(out)}
	if err != nil {
		return res, fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return res, fmt.Errorf("reading the usage of %s: %w", filepath.Base(name), err)
	}
	var wall, cpu, rssKiB int64
	if _, err := fmt.Sscan(string(b), &wall, &cpu, &rssKiB); err != nil {
		return res, fmt.Errorf("reading the usage of %s %q: %w", filepath.Base(name), b, err)
	}
	res.wall, res.cpu, res.rssMiB = time.Duration(wall), time.Duration(cpu), float64(rssKiB)/1024
	return res, nil
}
