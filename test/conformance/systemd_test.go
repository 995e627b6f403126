package conformance

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
)

// customizeRoot turns a Debian tree as mmdebstrap leaves it (host keys made by
// openssh-server's postinst, the build host's name, a machine-id) into a sealed seed that
// has never booted, with the units enabled (the site's reconfiguration service installed
// by the seal, as the OpenShift seal installs it) and the modules indexed for udev.
func TestCustomizeRootMakesAnUnbootedImage(t *testing.T) {
	_, kver, err := findKernel("")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for p, content := range map[string]string{
		"etc/ssh/ssh_host_ed25519_key": "k", "etc/ssh/ssh_host_ed25519_key.pub": "k", "etc/ssh/ssh_host_rsa_key": "k",
		"etc/ssh/sshd_config": "", "etc/hostname": "factory-builder\n", "etc/machine-id": "0123456789abcdef0123456789abcdef\n",
		"var/lib/dbus/machine-id": "0123456789abcdef0123456789abcdef\n",
		// Debian's systemd, by which the seal knows the root boots with systemd.
		"usr/lib/systemd/systemd": "ELF",
	} {
		if err := writeUnder(root, p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	agentBin := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agentBin, []byte("#!/bin/sh\n"), 0o755)
	if err := customizeRoot(context.Background(), root, kver, agentBin); err != nil {
		t.Fatal(err)
	}
	ssh, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if len(ssh) != 0 {
		t.Errorf("host keys left in the image: %v", ssh)
	}
	for _, gone := range []string{"etc/hostname", "var/lib/dbus/machine-id"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/machine-id")); err != nil || fi.Size() != 0 {
		t.Errorf("/etc/machine-id is not empty: %v", err)
	}
	for unit, wants := range systemdEnabled {
		if target, err := os.Readlink(filepath.Join(root, "etc/systemd/system", wants, unit)); err != nil || target != "/etc/systemd/system/"+unit {
			t.Errorf("%s not enabled in %s: %q %v", unit, wants, target, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, agent.ReconfigureUnitPath)); err != nil || string(b) != agent.ReconfigureUnit {
		t.Errorf("%s is not the seal's unit: %v\n%s", agent.ReconfigureUnitPath, err, b)
	}
	if target, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants", wire.ReconfigureUnitName)); err != nil || target != agent.ReconfigureUnitPath {
		t.Errorf("the seal did not enable %s in multi-user.target: %q %v", wire.ReconfigureUnitName, target, err)
	}
	var sealed wire.SealRequest
	b, err := os.ReadFile(filepath.Join(root, wire.SealedFile))
	if err == nil {
		err = json.Unmarshal(b, &sealed)
	}
	if err != nil || sealed.Target != oskind.CoreOS || sealed.Seed != SystemdSeedName || sealed.Fit == nil {
		t.Errorf("%s = %s (%v), want a coreos seal of %s with its fit", wire.SealedFile, b, err, SystemdSeedName)
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/local/lib/snofactory/ready.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("ready.sh is not executable: %v", err)
	}
	aliases, err := os.ReadFile(filepath.Join(root, "lib/modules", kver, "modules.alias"))
	if err != nil {
		t.Fatal(err)
	}
	// udev loads the NIC driver by its PCI alias (virtio device 1000 is the network card).
	if !strings.Contains(string(aliases), "alias virtio:d00000001v* virtio_net") {
		t.Errorf("modules.alias has no virtio_net alias:\n%s", aliases)
	}
}

// The Debian tree: only the essential set and the named packages, with no documentation,
// manual or translations, from the given mirror and its security archive.
func TestMmdebstrapArgs(t *testing.T) {
	args := mmdebstrapArgs("http://mirror.example/debian", "OUT")
	for _, want := range []string{"--variant=essential", "--include=" + strings.Join(SystemdPackages, ","),
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
		"deb http://mirror.example/debian bookworm main", "deb http://mirror.example/debian-security bookworm-security main", "OUT"} {
		if !slices.Contains(args, want) {
			t.Errorf("mmdebstrap arguments lack %q: %q", want, args)
		}
	}
}

// customizeMetal makes the OS as the live ISO installs it: unbooted as the seal leaves a
// seed (no host keys, an empty machine-id, no build host's name), but neither sealed nor
// carrying the site's reconfiguration service, which only the seal installs.
func TestCustomizeMetalIsUnbootedAndUnsealed(t *testing.T) {
	_, kver, err := findKernel("")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for p, content := range map[string]string{
		"etc/ssh/ssh_host_ed25519_key": "k", "etc/ssh/ssh_host_ecdsa_key.pub": "k", "etc/hostname": "factory-builder\n",
		"etc/machine-id": "0123456789abcdef0123456789abcdef\n", "var/lib/dbus/machine-id": "0123456789abcdef0123456789abcdef\n",
	} {
		if err := writeUnder(root, p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	agentBin := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agentBin, []byte("#!/bin/sh\n"), 0o755)
	if err := customizeMetal(context.Background(), root, kver, agentBin); err != nil {
		t.Fatal(err)
	}
	ssh, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if len(ssh) != 0 {
		t.Errorf("host keys left in the image: %v", ssh)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/machine-id")); err != nil || fi.Size() != 0 {
		t.Errorf("/etc/machine-id is not empty: %v", err)
	}
	for _, gone := range []string{"etc/hostname", "var/lib/dbus/machine-id", wire.SealedFile, agent.ReconfigureUnitPath,
		filepath.Join("etc/systemd/system/multi-user.target.wants", wire.ReconfigureUnitName)} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is in the metal image (%v)", gone, err)
		}
	}
	// The factory's units replace the readiness report, whose boot-complete would reach the
	// install stage before install-complete.
	enabled := maps.Clone(systemdEnabled)
	delete(enabled, "snofactory-ready.service")
	maps.Copy(enabled, metalEnabled)
	for unit, wants := range enabled {
		if target, err := os.Readlink(filepath.Join(root, "etc/systemd/system", wants, unit)); err != nil || target != "/etc/systemd/system/"+unit {
			t.Errorf("%s not enabled in %s: %q %v", unit, wants, target, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/snofactory-ready.service")); !os.IsNotExist(err) {
		t.Errorf("the readiness report is enabled in the metal image (%v)", err)
	}
	for _, p := range []string{wire.AgentPath, "usr/local/lib/snofactory/factory.sh", metalIgnitionDir + "/ignition", metalIgnitionDir + "/setfiles"} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s is not an executable in the metal image: %v", p, err)
		}
	}
}
