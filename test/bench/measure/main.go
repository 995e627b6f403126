// Command measure runs a command and writes its wall time and rusage (wait4's, of that
// child alone) to a file, as three numbers: wall ns, CPU ns (user and system), peak RSS
// KiB. Usage: measure OUT CMD ARGS...
//
// The bench runs its commands through this small program instead of starting them
// itself: a child started straight from the bench inherits the bench's own peak RSS.
// os/exec starts a child with vfork (CLONE_VM), so the address space the child's exec
// replaces is its parent's, and exec keeps that address space's high-water mark in the
// child's maxrss (Linux fs/exec.c, exec_mmap: setmax_mm_hiwater_rss). After its
// in-process benchmarks the bench holds hundreds of MiB, and every command showed that
// figure; this program, just started and with few dependencies, passes on a few MiB.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: measure OUT CMD ARGS...")
		os.Exit(2)
	}
	// An interrupt reaches the command from the terminal as it reaches this process,
	// which waits for the command to end; if the bench dies, this process is killed, and
	// the command with it (Pdeathsig).
	signal.Ignore(os.Interrupt)
	os.Exit(measure(os.Args[1], os.Args[2], os.Args[3:]))
}

// measure runs name with args on this process's standard streams, writes its usage to out
// and returns its exit code.
func measure(out, name string, args []string) int {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 127
	}
	var cpu, rssKiB int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = ru.Utime.Nano() + ru.Stime.Nano()
		rssKiB = ru.Maxrss // KiB on Linux
	}
	if err := os.WriteFile(out, fmt.Appendf(nil, "%d %d %d\n", wall.Nanoseconds(), cpu, rssKiB), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "writing the usage of %s: %v\n", name, err)
		return 1
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return max(code, 1) // -1: killed by a signal
	}
	return 0
}
