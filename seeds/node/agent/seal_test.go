package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// Nothing runs before the relocation configuration is checked to be in place.
func TestSealNeedsRequiredFiles(t *testing.T) {
	if _, err := Seal(context.Background(), t.TempDir(), "", wire.SealRequest{Version: 1, Target: "openshift", RequiredFiles: []string{"/etc/default/nodeip-configuration"}},
		func(context.Context, string, ...string) ([]byte, error) {
			t.Error("a command ran before the check")
			return nil, nil
		}); err == nil || !strings.Contains(err.Error(), "missing /etc/default/nodeip-configuration") {
		t.Errorf("sealing without the relocation configuration: %v", err)
	}
}

// Seal on a tree shaped like a node: per-node state, machine-id, host keys and the pull
// secret go, the directories stay, the marker is written. (The OpenShift sequence has its
// own tests in seal_openshift_test.go.)
func TestSeal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     wire.SealRequest
		keepPS  bool
		systemd string // the root's systemd binary, if any
	}{
		{name: "coreos", req: wire.SealRequest{Version: 1, Target: "coreos"}},
		{name: "coreos keeps the pull secret", req: wire.SealRequest{Version: 1, Target: "coreos", KeepPullSecret: true}, keepPS: true},
		{name: "coreos with systemd", req: wire.SealRequest{Version: 1, Target: "coreos"}, systemd: "usr/lib/systemd/systemd"},
		{name: "coreos with systemd in /lib", req: wire.SealRequest{Version: 1, Target: "coreos"}, systemd: "lib/systemd/systemd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{
				"etc/machine-id": "0123456789abcdef\n", "etc/ssh/ssh_host_ed25519_key": "k", "etc/ssh/sshd_config": "keep",
				"var/log/journal/x/system.journal": "j", "var/tmp/scratch": "s", "var/lib/kubelet/config.json": `{"auths":{}}`,
				"var/lib/kubelet/pods/p1/volume": "v", "usr/bin/tool": "keep", "etc/cni/multus/certs/multus-client.pem": "c",
				"var/roothome/.bash_history": "h", "var/lib/cni/bin/bridge": "b", "var/lib/log/x": "l", "etc/hostname": "keep",
				"var/lib/dbus/machine-id": "0123456789abcdef\n",
			}
			if tc.systemd != "" {
				files[tc.systemd] = "ELF"
			}
			for p, body := range files {
				os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
				os.WriteFile(filepath.Join(root, p), []byte(body), 0o600)
			}
			run := func(_ context.Context, name string, args ...string) ([]byte, error) {
				t.Errorf("a coreos seal ran %s %q", name, args)
				return nil, nil
			}
			boot := filepath.Join(root, "boot")
			os.MkdirAll(filepath.Join(boot, "ignition"), 0o755)
			os.WriteFile(filepath.Join(boot, "ignition", "config.ign"), []byte(`{"ignition":{}}`), 0o600)
			steps, err := Seal(context.Background(), root, boot, tc.req, run)
			if err != nil {
				t.Fatal(err)
			}
			exists := func(p string) bool { _, err := os.Stat(filepath.Join(root, p)); return err == nil }
			for _, gone := range []string{"boot/ignition/config.ign", "etc/ssh/ssh_host_ed25519_key", "var/log/journal", "var/tmp/scratch",
				"var/lib/kubelet/pods/p1", "etc/cni/multus/certs/multus-client.pem",
				"var/roothome/.bash_history", "var/lib/cni/bin/bridge", "var/lib/log/x", "var/lib/dbus/machine-id"} {
				if exists(gone) {
					t.Errorf("%s survived the seal", gone)
				}
			}
			for _, kept := range []string{"etc/ssh/sshd_config", "usr/bin/tool", "etc/hostname", "var/log", "var/tmp", wire.SealedFile[1:]} {
				if !exists(kept) {
					t.Errorf("%s is gone", kept)
				}
			}
			if exists("var/lib/kubelet/config.json") != tc.keepPS {
				t.Errorf("pull secret kept = %v, want %v", !tc.keepPS, tc.keepPS)
			}
			// Empty, not missing and not "uninitialized": either of those is a systemd first
			// boot, which re-applies presets (machine-id(5)).
			if b, err := os.ReadFile(filepath.Join(root, "etc/machine-id")); err != nil || len(b) != 0 {
				t.Errorf("machine-id = %q, %v; want an empty file", b, err)
			}
			d := SealDetails(steps)
			if d["step.sealed"] != wire.SealedFile || d["step.machine-id"] == "" {
				t.Errorf("details = %v", d)
			}
			// The real run took exactly the dry run's steps.
			plan := Sealer{Root: root, BootDir: boot, Request: tc.req}.Plan()
			if len(plan) != len(steps) {
				t.Fatalf("ran %d steps, the plan has %d", len(steps), len(plan))
			}
			for i := range plan {
				if plan[i].Name != steps[i].Name {
					t.Errorf("step %d ran %s, the plan says %s", i, steps[i].Name, plan[i].Name)
				}
			}
			// Sealing again (a power cut after the marker) does the same and succeeds.
			if _, err := Seal(context.Background(), root, boot, tc.req, run); err != nil {
				t.Errorf("second seal: %v", err)
			}
			checkCoreOSReconfigureUnit(t, root, tc.systemd != "")
		})
	}
}

// RHCOS links the D-Bus machine ID to /etc/machine-id: the link stays (it follows the new
// ID), and only a regular file, which systemd would copy back, goes.
func TestSealMachineIDLinkKept(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.MkdirAll(filepath.Join(root, "var/lib/dbus"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/machine-id"), []byte("0123456789abcdef\n"), 0o444)
	if err := os.Symlink("/etc/machine-id", filepath.Join(root, "var/lib/dbus/machine-id")); err != nil {
		t.Fatal(err)
	}
	act := Sealer{Root: root}.withDefaults().machineIDAction()
	if _, err := act.do(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(root, "var/lib/dbus/machine-id")); err != nil || l != "/etc/machine-id" {
		t.Errorf("the D-Bus link: %q, %v", l, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/machine-id")); err != nil || len(b) != 0 {
		t.Errorf("machine-id = %q, %v", b, err)
	}
}

// A coreos root that boots systemd gets the site's hook as an OpenShift seal installs it:
// the same unit at the same path, enabled in multi-user.target as systemctl enable links
// it; a root without systemd (the busybox OS, whose init runs the hook) gets neither.
func checkCoreOSReconfigureUnit(t *testing.T, root string, systemd bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ReconfigureUnitPath))
	link, lerr := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants", wire.ReconfigureUnitName))
	if !systemd {
		if err == nil || lerr == nil {
			t.Errorf("a root without systemd got the reconfiguration unit (%v) or its link (%v)", err, lerr)
		}
		return
	}
	if err != nil || string(b) != ReconfigureUnit {
		t.Errorf("the reconfiguration unit is not the OpenShift seal's: %v\n%s", err, b)
	}
	if lerr != nil || link != ReconfigureUnitPath {
		t.Errorf("the unit is not enabled in multi-user.target: link %q, %v", link, lerr)
	}
}
