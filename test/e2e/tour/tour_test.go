package tour

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/testbin"
)

// tourHeading is the README section whose sh blocks the tour test runs.
const tourHeading = "## A short tour"

// tourBlock is one sh code block of the tour with its commands, in order.
type tourBlock struct {
	heading  string // the "### " heading it sits under; "" for the tour's own text
	commands []string
}

// readTour returns the sh blocks of the README's tour section. A command is a line, joined
// with the lines that follow while it ends in a backslash; blank and comment-only lines are
// not commands. The shell runs each command, so its trailing comment stays.
func readTour(readme string) ([]tourBlock, error) {
	var blocks []tourBlock
	var cur *tourBlock
	in, heading, pending := false, "", ""
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in:
			if line == tourHeading {
				in = true
			}
		case cur != nil && line == "```":
			if pending != "" {
				return nil, fmt.Errorf("README tour: the block ends inside a continued command %q", pending)
			}
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			if cmd, more := strings.CutSuffix(line, "\\"); more {
				pending += cmd
				continue
			}
			cmd := strings.TrimSpace(pending + line)
			pending = ""
			if cmd != "" && !strings.HasPrefix(cmd, "#") {
				cur.commands = append(cur.commands, cmd)
			}
		case strings.HasPrefix(line, "## "):
			in = false
		case strings.HasPrefix(line, "### "):
			heading = strings.TrimPrefix(line, "### ")
		case line == "```sh":
			cur = &tourBlock{heading: heading}
		}
	}
	if cur != nil {
		return nil, errors.New("README tour: a code block is not closed")
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("README has no sh block under %q", tourHeading)
	}
	return blocks, nil
}

func TestReadTour(t *testing.T) {
	for _, tc := range []struct {
		name, readme string
		want         []tourBlock
		wantErr      string
	}{
		{
			name: "commands, continuations, comments and sub-headings",
			readme: "# x\n```sh\nmake demo\n```\n" + tourHeading + "\ntext\n```sh\na b   # says a\n# only a comment\n\nc \\\n  d\n```\n" +
				"### Needs a network\n```sh\ne\n```\n```yaml\nf: 1\n```\n## Next\n```sh\ng\n```\n",
			want: []tourBlock{
				{commands: []string{"a b   # says a", "c   d"}},
				{heading: "Needs a network", commands: []string{"e"}},
			},
		},
		{name: "no tour", readme: "# x\n```sh\na\n```\n", wantErr: "no sh block"},
		{name: "unclosed block", readme: tourHeading + "\n```sh\na\n", wantErr: "not closed"},
		{name: "dangling continuation", readme: tourHeading + "\n```sh\na \\\n```\n", wantErr: "continued command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readTour(tc.readme)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// tourCheck is what one tour command must have done beyond exiting 0.
type tourCheck struct {
	command string // a substring of exactly one tour command
	check   func(dir, stdout string) error
}

// tourChecks returns the key result of the tour's commands, each cheap to check.
func tourChecks() []tourCheck {
	return []tourCheck{
		{"snofactory validate blueprints/*.yaml", func(_, out string) error {
			return wantContains(out, "blueprints/demo.yaml: ok")
		}},
		{"snofactory schema", func(dir, _ string) error {
			var s map[string]any
			if err := readJSON(filepath.Join(dir, "blueprint.schema.json"), &s); err != nil {
				return err
			}
			if s["$schema"] == nil {
				return errors.New("blueprint.schema.json has no $schema")
			}
			return nil
		}},
		{"snofactory render blueprints/demo.yaml", func(dir, _ string) error {
			var c struct{ Ignition struct{ Version string } }
			if err := readJSON(filepath.Join(dir, "out/render/ignition/config.ign"), &c); err != nil {
				return err
			}
			if c.Ignition.Version != "3.3.0" {
				return fmt.Errorf("rendered Ignition version %q, want the demo's 3.3.0", c.Ignition.Version)
			}
			return nil
		}},
		{"snofactory plan blueprints/demo.yaml", func(_, out string) error {
			return wantContains(out, "validate ")
		}},
		{"snofactory iso show", func(dir, out string) error {
			b, err := os.ReadFile(filepath.Join(dir, "out/render/ignition/config.ign"))
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != strings.TrimSpace(string(b)) {
				return fmt.Errorf("the ISO carries %q, not the rendered config %q", out, b)
			}
			return nil
		}},
		{"snofactory iso kargs show", func(_, out string) error {
			return wantContains(out, "console=tty0")
		}},
		{"go run ./test/cmd/demoenv", func(dir, out string) error {
			for _, want := range []string{"build demo succeeded", "Signature:", "verified by key",
				"https://slsa.dev/provenance/v1", "https://spdx.dev/Document"} {
				if err := wantContains(out, want); err != nil {
					return err
				}
			}
			if strings.Contains(out, "NOT VERIFIED") {
				return fmt.Errorf("inspect found an attachment that does not verify:\n%s", out)
			}
			var v struct {
				Summary struct{ Passed, Failed, Errors int }
			}
			if err := readJSON(filepath.Join(dir, "out/demo/validation.json"), &v); err != nil {
				return err
			}
			if v.Summary.Passed == 0 || v.Summary.Failed != 0 || v.Summary.Errors != 0 {
				return fmt.Errorf("validation summary %+v, want passes and no failure", v.Summary)
			}
			return nil
		}},
		{"snofactory keys generate", func(dir, _ string) error {
			_, err := os.Stat(filepath.Join(dir, "out/demo-key.pub"))
			return err
		}},
		{"snofactory depot status", func(dir, out string) error {
			if err := wantContains(out, "depot succeeded: 1 succeeded"); err != nil {
				return err
			}
			_, err := os.Stat(filepath.Join(dir, "out/depot/report.html"))
			return err
		}},
		{"snofactory seed verify", func(_, out string) error {
			return wantContains(out, "every digest matches")
		}},
		{"snofactory site-config create", func(dir, _ string) error {
			_, err := os.Stat(filepath.Join(dir, "out/site.iso"))
			return err
		}},
		{"snofactory seed boot", func(_, out string) error {
			for _, want := range []string{"hostname=edge-01", "address.eth0=10.0.2.50/24", "Seed reconfigured and booted"} {
				if err := wantContains(out, want); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

func wantContains(out, want string) error {
	if !strings.Contains(out, want) {
		return fmt.Errorf("output does not contain %q:\n%s", want, out)
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// TestREADMETour runs every command of the README's tour as written, in order, in a fresh
// copy of the repository's tracked files with the conformance ISO in place (what `make
// deps build conformance-iso` leaves) and snofactory on PATH, with a fresh snofactory
// cache and no network: Go's proxy is off and HTTP(S) goes through a proxy that refuses.
// Blocks under a sub-heading that needs a real OpenShift release are named and skipped.
func TestREADMETour(t *testing.T) {
	// It has its own cache, registry and VMs: it runs beside the package's other tests.
	t.Parallel()
	skipped := map[string]string{
		"With a real OpenShift release": "reads a real release from quay.io with a real pull secret; tests run without a network",
	}
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readTour(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	checks := matchChecks(t, blocks, skipped)
	headings := map[string]bool{}
	for _, b := range blocks {
		headings[b.heading] = true
	}
	for heading := range skipped {
		if !headings[heading] {
			t.Fatalf("the README tour has no %q block: update the skipped blocks here", heading)
		}
	}
	dir, env := tourWorkspace(t, root)
	for _, b := range blocks {
		if reason, ok := skipped[b.heading]; ok {
			t.Run(b.heading, func(t *testing.T) {
				t.Skipf("%s: %s", reason, strings.Join(b.commands, "; "))
			})
			continue
		}
		for _, cmd := range b.commands {
			if !t.Run(subtestName(cmd), func(t *testing.T) { runTourCommand(t, dir, env, cmd, checks[cmd]) }) {
				t.Fatalf("the tour stops at %q: later commands use what it makes", cmd)
			}
		}
	}
}

// matchChecks maps each tour command to its check, failing the test when a check matches
// no command or several: the checks follow the README, not the other way round.
func matchChecks(t *testing.T, blocks []tourBlock, skipped map[string]string) map[string]func(dir, stdout string) error {
	t.Helper()
	out := map[string]func(dir, stdout string) error{}
	for _, c := range tourChecks() {
		var found []string
		for _, b := range blocks {
			if _, skip := skipped[b.heading]; skip {
				continue
			}
			for _, cmd := range b.commands {
				if strings.Contains(cmd, c.command) {
					found = append(found, cmd)
				}
			}
		}
		if len(found) != 1 {
			t.Fatalf("the check for %q matches %d tour commands %q, want one: update tourChecks with the README", c.command, len(found), found)
		}
		out[found[0]] = c.check
	}
	return out
}

// tourWorkspace makes the fresh copy the tour runs in and the environment it runs with:
// snofactory on PATH, a snofactory cache of its own, the Go build cache it already has
// (XDG_CACHE_HOME would move it), no GOFLAGS (a user's shell has none), and no network.
func tourWorkspace(t *testing.T, root string) (dir string, env []string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "repo")
	copyTracked(t, root, dir)
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(conformance.DefaultISOPath)), 0o755); err != nil {
		t.Fatal(err)
	}
	testbin.CopyFile(t, iso, filepath.Join(dir, conformance.DefaultISOPath))
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	tmp := filepath.Join(base, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	const refuse = "http://127.0.0.1:9" // discard: nothing answers, loopback still bypasses it
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "PATH", "XDG_CACHE_HOME", "GOCACHE", "GOFLAGS", "GOPROXY", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY":
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PATH="+filepath.Dir(snofactoryBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_CACHE_HOME="+filepath.Join(base, "cache"),
		"GOCACHE="+strings.TrimSpace(string(gocache)),
		"GOPROXY=off",
		"TMPDIR="+tmp,
		"HTTP_PROXY="+refuse, "HTTPS_PROXY="+refuse, "http_proxy="+refuse, "https_proxy="+refuse,
	)
	return dir, env
}

// copyTracked copies the files git tracks in root, as they are in the working tree, into
// dst: what a fresh clone of this tree holds.
func copyTracked(t *testing.T, root, dst string) {
	t.Helper()
	// safe.directory: the checkout may belong to another user than the one running tests.
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("listing the repository's files (the tour runs on a copy of a git checkout): %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src, to := filepath.Join(root, name), filepath.Join(dst, name)
		info, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err == nil {
			err = os.MkdirAll(filepath.Dir(to), 0o755)
		}
		if err == nil && info.Mode()&os.ModeSymlink != 0 {
			var target string
			if target, err = os.Readlink(src); err == nil {
				err = os.Symlink(target, to)
			}
		} else if err == nil {
			err = os.Chmod(testbin.CopyFile(t, src, to), info.Mode().Perm()) // scripts stay executable
		}
		if err != nil {
			t.Fatalf("copying %s: %v", name, err)
		}
	}
}

// runTourCommand runs one command with sh, as a reader pastes it, in its own process group
// so that nothing it starts outlives it, and checks its exit code and key result.
func runTourCommand(t *testing.T, dir string, env []string, command string, check func(dir, stdout string) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stdout bytes.Buffer
	stderr := pipeline.NewTailBuffer(8192)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		reapGroup(t, command, cmd.Process.Pid)
	}
	t.Logf("took %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("%q: %v\nstdout:\n%s\nstderr (tail):\n%s", command, err, stdout.String(), stderr)
	}
	if check != nil {
		if err := check(dir, stdout.String()); err != nil {
			t.Fatalf("%q: %v\nstderr (tail):\n%s", command, err, stderr)
		}
	}
}

// reapGroup makes sure nothing the command started outlives it. A process still in its
// group is either dying already (a child its parent's death killed: SIGKILL pending,
// exiting, or a zombie) or was left running, which is reported. The group is then killed,
// and the test waits on each member's pidfd until it has exited, however long that takes:
// the wait is on the event, not on a clock. Members are listed again until none is left
// alive, so one forked while the first were listed is not missed.
func reapGroup(t *testing.T, command string, pgid int) {
	t.Helper()
	for first := true; ; first = false {
		members, err := groupMembers(pgid)
		if err != nil {
			t.Errorf("listing what %q left in its process group: %v", command, err)
			return
		}
		var fds []unix.PollFd
		for _, pid := range members {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // gone since it was listed
			}
			defer unix.Close(fd)
			// Read its state only now: the pidfd pins the process, so a reused pid cannot
			// be mistaken for it.
			if first {
				if dying, err := procDying(pid); err == nil && !dying {
					t.Errorf("%q left %s running in its process group; killed it", command, procName(pid))
				}
			}
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		if len(fds) == 0 {
			return
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		if err := waitExited(fds); err != nil {
			t.Errorf("waiting for what %q left in its process group: %v", command, err)
			return
		}
	}
}

// groupMembers lists the live (not zombie) processes of a process group from /proc.
func groupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procStat(pid)
		if err != nil || len(st) < 3 || st[0] == "Z" || st[0] == "X" {
			continue // gone, or exited and waiting to be reaped
		}
		if g, err := strconv.Atoi(st[2]); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out, nil
}

// procStat is /proc/PID/stat after the command name: state, ppid, pgrp, session, tty,
// tpgid, flags, ...
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// procDying reports whether a process is on its way out: a zombie, exiting (PF_EXITING in
// its flags), or with SIGKILL pending, as Pdeathsig leaves a child whose parent died.
func procDying(pid int) (bool, error) {
	const pfExiting, sigkill = 0x4, uint64(1) << (syscall.SIGKILL - 1)
	st, err := procStat(pid)
	if err != nil || len(st) < 7 {
		return false, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	flags, err := strconv.ParseUint(st[6], 10, 64)
	if err != nil {
		return false, fmt.Errorf("/proc/%d/stat flags: %w", pid, err)
	}
	if st[0] == "Z" || st[0] == "X" || flags&pfExiting != 0 {
		return true, nil
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkill != 0 {
			return true, nil
		}
	}
	return false, nil
}

// procName names a process for a message: its pid and command line.
func procName(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")))
}

// waitExited blocks until every pidfd is readable, which it becomes when its process exits.
func waitExited(fds []unix.PollFd) error {
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		left := fds[:0]
		for _, fd := range fds {
			if fd.Revents == 0 {
				left = append(left, unix.PollFd{Fd: fd.Fd, Events: unix.POLLIN})
			}
		}
		if fds = left; len(fds) == 0 {
			return nil
		}
	}
}

// subtestName is a command without its comment, short enough to read in test output.
func subtestName(command string) string {
	name, _, _ := strings.Cut(command, " #")
	name = strings.Join(strings.Fields(name), " ")
	if len(name) > 60 {
		name = name[:60] + "..."
	}
	return name
}
