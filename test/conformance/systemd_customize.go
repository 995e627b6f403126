package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
)

// SystemdSeedName is the seed name the systemd OS is sealed with (sealed.json's seed).
const SystemdSeedName = "conformance-systemd"

// The systemd OS's own files: where each embedded file goes in the root, and the units
// enabled by a link in a target's .wants directory.
var (
	systemdPlaced = map[string]string{
		"units/sshd-keygen@.service":           "/etc/systemd/system/sshd-keygen@.service",
		"units/sshd-keygen.target":             "/etc/systemd/system/sshd-keygen.target",
		"units/ssh-keygen.conf":                "/etc/systemd/system/ssh.service.d/keygen.conf",
		"units/snofactory-firstboot.service":   "/etc/systemd/system/snofactory-firstboot.service",
		"units/snofactory-ready.service":       "/etc/systemd/system/snofactory-ready.service",
		"units/snofactory-proxy-probe.service": "/etc/systemd/system/snofactory-proxy-probe.service",
		"units/no-auto-default.conf":           "/etc/NetworkManager/conf.d/no-auto-default.conf",
		"ready.sh":                             "/usr/local/lib/snofactory/ready.sh",
	}
	systemdEnabled = map[string]string{
		"snofactory-ready.service":       "multi-user.target.wants",
		"snofactory-firstboot.service":   "sysinit.target.wants",
		"snofactory-proxy-probe.service": "multi-user.target.wants",
	}
)

// customizeRoot makes the unpacked Debian tree at root a sealed seed that has never booted
// at its site, as an RHCOS seed is: the agent, the units and the kernel modules udev loads,
// then the real coreos seal (agent.Seal), which leaves what it leaves on every seed: the
// site's reconfiguration service (agent.ReconfigureUnit, on a root that boots with
// systemd), no SSH host keys (sshd-keygen@.service makes them at the first boot, as on
// RHCOS), an empty machine-id, no per-node state, and sealed.json, which the hook reads.
// The build host's name goes too.
func customizeRoot(ctx context.Context, root, kver, agentBin string) error {
	if err := prepareRoot(ctx, root, kver, agentBin); err != nil {
		return err
	}
	req := wire.SealRequest{Version: wire.SealRequestVersion, Target: oskind.CoreOS, Seed: SystemdSeedName,
		Fit: &seedfit.Record{Version: seedfit.Version}}
	if _, err := agent.Seal(ctx, root, "", req, nil); err != nil {
		return fmt.Errorf("sealing the systemd conformance OS: %w", err)
	}
	return nil
}

// customizeMetal makes the unpacked Debian tree at root the OS as the live ISO installs
// it, as an RHCOS metal image ships: the agent, the units and the modules, but not the
// site's reconfiguration service (the seal installs that) and no seal; no SSH host keys,
// an empty machine-id (systemd makes one at boot; empty rather than absent, so the boot
// is not a first boot that would run systemd-firstboot's console prompts), no D-Bus
// machine-id and no build host's name.
func customizeMetal(ctx context.Context, root, kver, agentBin string) error {
	if err := prepareRoot(ctx, root, kver, agentBin); err != nil {
		return err
	}
	keys, err := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if err != nil {
		return err
	}
	for _, p := range append(keys, filepath.Join(root, "var/lib/dbus/machine-id")) {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("the metal image's unbooted state: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/machine-id"), nil, 0o444); err != nil {
		return err
	}
	return placeFactory(root)
}

// The metal image's factory side (systemd/metal): the units that serve the install,
// validate and seal stages on the installed disk, in place of the readiness report, and
// Ignition with the setfiles stand-in the busybox initramfs gives it (populate).
var (
	metalPlaced = map[string]string{
		"metal/factory.sh":                           "/usr/local/lib/snofactory/factory.sh",
		"metal/snofactory-factory-firstboot.service": "/etc/systemd/system/snofactory-factory-firstboot.service",
		"metal/snofactory-factory.service":           "/etc/systemd/system/snofactory-factory.service",
	}
	metalEnabled = map[string]string{
		"snofactory-factory-firstboot.service": "sysinit.target.wants",
		"snofactory-factory.service":           "multi-user.target.wants",
	}
	// metalIgnitionDir holds Ignition and the stand-ins on its PATH (factory.sh IGN).
	metalIgnitionDir = "/usr/lib/snofactory/ignition"
)

// placeFactory writes the metal image's factory files and Ignition, enables the factory
// units and disables the readiness report, whose boot-complete the factory's install-complete
// and report command carry instead (ready.sh with arguments).
func placeFactory(root string) error {
	if err := placeEmbedded(root, metalPlaced); err != nil {
		return err
	}
	for unit, wants := range metalEnabled {
		if err := enableUnit(root, unit, wants); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/snofactory-ready.service")); err != nil {
		return fmt.Errorf("disabling the readiness report in the metal image: %w", err)
	}
	ign, err := os.ReadFile(ignitionBin.src)
	if err != nil {
		return fmt.Errorf("reading Ignition (Debian package %s): %w", ignitionBin.pkg, err)
	}
	if err := writeUnder(root, metalIgnitionDir+"/ignition", ign, 0o755); err != nil {
		return err
	}
	return writeUnder(root, metalIgnitionDir+"/setfiles", []byte(setfilesShim), 0o755)
}

// prepareRoot places the OS's own files, the agent and the kernel modules, and removes
// the build host's name.
func prepareRoot(ctx context.Context, root, kver, agentBin string) error {
	if err := os.Remove(filepath.Join(root, "etc/hostname")); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := placeSystemdFiles(root); err != nil {
		return err
	}
	b, err := os.ReadFile(agentBin)
	if err != nil {
		return fmt.Errorf("reading the agent: %w", err)
	}
	if err := writeUnder(root, wire.AgentPath, b, 0o755); err != nil {
		return err
	}
	return rootModules(ctx, root, kver)
}

// placeSystemdFiles writes the embedded files and enables the units. The site's
// reconfiguration service is not among them: the seal installs it.
func placeSystemdFiles(root string) error {
	if err := placeEmbedded(root, systemdPlaced); err != nil {
		return err
	}
	for unit, wants := range systemdEnabled {
		if err := enableUnit(root, unit, wants); err != nil {
			return err
		}
	}
	return nil
}

// placeEmbedded writes each embedded systemd/SRC to its DST under root, scripts executable.
func placeEmbedded(root string, placed map[string]string) error {
	for src, dst := range placed {
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
	return nil
}

// enableUnit links unit into wants under root's /etc/systemd/system, as systemctl enable.
func enableUnit(root, unit, wants string) error {
	link := filepath.Join(root, "etc/systemd/system", wants, unit)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/etc/systemd/system/"+unit, link); err != nil {
		return fmt.Errorf("enabling %s: %w", unit, err)
	}
	return nil
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
