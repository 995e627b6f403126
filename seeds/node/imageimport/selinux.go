package imageimport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SELinuxReport says whether what the import wrote was relabeled, and why not.
type SELinuxReport struct {
	Relabeled bool `json:"relabeled"`
	// Command is the relabel that ran.
	Command []string `json:"command,omitempty"`
	// Skipped says why nothing was relabeled.
	Skipped string `json:"skipped,omitempty"`
}

// defaultSELinuxFS is where the kernel's SELinux interface is mounted when SELinux is on
// (libselinux's selinux_mnt).
const defaultSELinuxFS = "/sys/fs/selinux"

// relabel gives what the import wrote below the graph root the labels the node's policy
// wants, as lifecycle-agent does after it sets up the store it precaches into
// (lca-cli/ops/ops.go: CreateExtraPartition and SetupContainersFolderCommands run
// `restorecon -R /var/lib/containers`). Files the agent creates inherit their directory's
// label rather than the policy's (container_ro_file_t for overlay layers), which CRI-O's
// containers then cannot read. On a system without SELinux it says why it did nothing.
func relabel(ctx context.Context, opts Options, graph string) (SELinuxReport, error) {
	if opts.Root == "" {
		return SELinuxReport{Skipped: "no node root given: the store is not a node's"}, nil
	}
	policy, why := selinuxPolicy(opts)
	if why != "" {
		return SELinuxReport{Skipped: why}, nil
	}
	cmd := []string{"restorecon", "-R", graph}
	if filepath.Clean(opts.Root) != "/" {
		// restorecon labels by the running system's policy and paths; setfiles labels
		// another root with that root's file contexts (setfiles.c main: -r alt_root_path).
		fc := filepath.Join(opts.Root, "etc/selinux", policy, "contexts/files/file_contexts")
		cmd = []string{"setfiles", "-r", opts.Root, fc, graph}
	}
	if _, err := exec.LookPath(cmd[0]); err != nil {
		return SELinuxReport{Skipped: fmt.Sprintf("%s is not installed (policycoreutils): nothing can relabel the store", cmd[0])}, nil
	}
	out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		return SELinuxReport{Command: cmd}, fmt.Errorf("relabeling the imported images for SELinux (%s): %w: %s", strings.Join(cmd, " "), err, bytes.TrimSpace(out))
	}
	opts.Log.Info("relabeled the imported images for SELinux", "command", strings.Join(cmd, " "))
	return SELinuxReport{Relabeled: true, Command: cmd}, nil
}

// selinuxPolicy returns the SELinux policy the node at opts.Root labels files with, or why
// there is none to relabel for: a policy configured and enabled in /etc/selinux/config, its
// file contexts, and the running kernel's SELinux interface (without it restorecon exits 0
// without a word: SELinuxProject/selinux policycoreutils/setfiles/setfiles.c, main).
func selinuxPolicy(opts Options) (policy, why string) {
	conf := filepath.Join(opts.Root, "etc/selinux/config")
	mode, policy, err := readSELinuxConfig(conf)
	switch {
	case os.IsNotExist(err):
		return "", "this system has no SELinux policy (no /etc/selinux/config)"
	case err != nil:
		return "", fmt.Sprintf("reading /etc/selinux/config: %v", err)
	case mode == "disabled":
		return "", "SELinux is disabled in /etc/selinux/config"
	case policy == "":
		return "", "/etc/selinux/config names no SELINUXTYPE"
	}
	fc := filepath.Join("/etc/selinux", policy, "contexts/files/file_contexts")
	if _, err := os.Stat(filepath.Join(opts.Root, fc)); err != nil {
		return "", fmt.Sprintf("the SELinux policy %s has no file contexts (%s)", policy, fc)
	}
	fs := opts.selinuxFS
	if fs == "" {
		fs = defaultSELinuxFS
	}
	if _, err := os.Stat(filepath.Join(fs, "enforce")); err != nil {
		return "", fmt.Sprintf("the running kernel has SELinux off (no %s)", fs)
	}
	return policy, ""
}

// readSELinuxConfig reads SELINUX= and SELINUXTYPE= from /etc/selinux/config.
func readSELinuxConfig(path string) (mode, policy string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch strings.TrimSpace(k) {
		case "SELINUX":
			mode = strings.ToLower(v)
		case "SELINUXTYPE":
			policy = v
		}
	}
	return mode, policy, sc.Err()
}
