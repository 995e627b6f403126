package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
)

// The systemd OS's own files: where each embedded file goes in the root, and the units
// enabled by a link in a target's .wants directory.
var (
	systemdPlaced = map[string]string{
		"units/sshd-keygen@.service":         "/etc/systemd/system/sshd-keygen@.service",
		"units/sshd-keygen.target":           "/etc/systemd/system/sshd-keygen.target",
		"units/ssh-keygen.conf":              "/etc/systemd/system/ssh.service.d/keygen.conf",
		"units/snofactory-firstboot.service": "/etc/systemd/system/snofactory-firstboot.service",
		"units/snofactory-ready.service":     "/etc/systemd/system/snofactory-ready.service",
		"units/no-auto-default.conf":         "/etc/NetworkManager/conf.d/no-auto-default.conf",
		"ready.sh":                           "/usr/local/lib/snofactory/ready.sh",
	}
	systemdEnabled = map[string]string{
		"snofactory-ready.service":     "multi-user.target.wants",
		"snofactory-firstboot.service": "sysinit.target.wants",
	}
)

// customizeRoot makes the unpacked Debian tree at root a node that has never booted, as an
// RHCOS disk image is: no SSH host keys (Debian's openssh-server made them when it was
// installed; sshd-keygen@.service makes them at the first boot, as on RHCOS), an empty
// machine-id (systemd makes one at the first boot) and no host name. It adds the agent,
// the units, and the kernel modules udev loads.
func customizeRoot(ctx context.Context, root, kver, agent string) error {
	keys, err := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if err != nil {
		return err
	}
	for _, k := range append(keys, filepath.Join(root, "etc/hostname"), filepath.Join(root, "var/lib/dbus/machine-id")) {
		if err := os.Remove(k); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/machine-id"), nil, 0o444); err != nil {
		return err
	}
	for src, dst := range systemdPlaced {
		b, err := systemdFiles.ReadFile("systemd/" + src)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if filepath.Ext(src) == ".sh" {
			mode = 0o755
		}
		if err := writeUnder(root, dst, b, mode); err != nil {
			return err
		}
	}
	for unit, wants := range systemdEnabled {
		link := filepath.Join(root, "etc/systemd/system", wants, unit)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/etc/systemd/system/"+unit, link); err != nil {
			return fmt.Errorf("enabling %s: %w", unit, err)
		}
	}
	b, err := os.ReadFile(agent)
	if err != nil {
		return fmt.Errorf("reading the agent: %w", err)
	}
	if err := writeUnder(root, "/usr/local/bin/snofactory", b, 0o755); err != nil {
		return err
	}
	return rootModules(ctx, root, kver)
}

func writeUnder(root, p string, b []byte, mode os.FileMode) error {
	dst := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return os.Chmod(dst, mode)
}

// rootModules copies systemdRootModules and their dependencies into the root at their
// places under /lib/modules/KVER, with the kernel's lists of built-in modules, and indexes
// them with depmod so udev and modprobe find them by alias.
func rootModules(ctx context.Context, root, kver string) error {
	order, err := moduleOrder(kver, systemdRootModules)
	if err != nil {
		return err
	}
	for _, name := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		order = append(order, name)
	}
	for _, rel := range order {
		b, err := os.ReadFile(filepath.Join("/lib/modules", kver, rel))
		if err != nil {
			return fmt.Errorf("kernel module (Debian package %s): %w", pkgKernel, err)
		}
		if err := writeUnder(root, filepath.Join("/lib/modules", kver, rel), b, 0o644); err != nil {
			return err
		}
	}
	if err := pipeline.RunTool(ctx, exec.Command("depmod", "-b", root, kver), nil); err != nil {
		return fmt.Errorf("indexing the root's kernel modules: %w", err)
	}
	return nil
}
